import { mkdtempSync, rmSync } from "node:fs";
import { connect, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogger } from "@kvt/observability";
import { afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { MigrationTlsIdentity } from "../machine.ts";
import { migrationTlsPair } from "../migration-tls.test-util.ts";
import { connectOutgoing, IncomingRelay, MigrationAuthError, newMigrationSecret } from "./migration-relay.ts";

const logger = createLogger({ component: "relay-test", level: "silent" });

/** A stand-in for QEMU's incoming unix socket: records every byte it receives. */
function fakeQemu(path: string): Promise<{ server: Server; received: () => Buffer }> {
  const chunks: Buffer[] = [];
  const server = createServer((s) => s.on("data", (c: Buffer) => chunks.push(c)));
  return new Promise((resolve) =>
    server.listen(path, () => resolve({ server, received: () => Buffer.concat(chunks) })),
  );
}

async function until(check: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A TCP hop between the source and the target relay that records (and may alter) the source's bytes. */
async function recorder(
  port: number,
  alter: (chunk: Buffer, seen: number) => void = () => undefined,
): Promise<{ server: Server; port: number; wire: () => Buffer; upstream: () => Socket | undefined }> {
  const wire: Buffer[] = [];
  let upstream: Socket | undefined;
  const server = createServer((src) => {
    const dst = connect({ host: "127.0.0.1", port });
    upstream = dst;
    let seen = 0;
    src.on("data", (c: Buffer) => {
      const out = Buffer.from(c);
      alter(out, seen);
      seen += out.length;
      wire.push(Buffer.from(out));
      dst.write(out);
    });
    dst.pipe(src);
    src.on("error", () => dst.destroy());
    dst.on("error", () => src.destroy());
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return {
    server,
    port: (server.address() as { port: number }).port,
    wire: () => Buffer.concat(wire),
    upstream: () => upstream,
  };
}

describe("migration relay", () => {
  let dir: string;
  let sock: string;
  let tls: { source: MigrationTlsIdentity; target: MigrationTlsIdentity };
  let stranger: MigrationTlsIdentity;
  const cleanup: (() => void)[] = [];
  beforeAll(async () => {
    tls = await migrationTlsPair();
    stranger = (await migrationTlsPair()).source;
  });
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "kvt-relay-"));
    sock = join(dir, "in.sock");
  });
  afterEach(() => {
    for (const c of cleanup.splice(0)) c();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A target relay over TLS with the source's certificate pinned, and its fake QEMU. */
  async function tlsTarget(secret: string): Promise<{ relay: IncomingRelay; received: () => Buffer }> {
    const qemu = await fakeQemu(sock);
    const relay = await IncomingRelay.listen("127.0.0.1", secret, sock, logger, { tls: tls.target });
    relay.trustSource(tls.source.certificate);
    cleanup.push(
      () => qemu.server.close(),
      () => relay.close(),
    );
    return { relay, received: qemu.received };
  }
  const sourceTls = () => ({ ...tls.source, peerCertificate: tls.target.certificate });

  it("forwards the stream to QEMU only after TLS with pinned certificates and the mutual HMAC handshake", async () => {
    const secret = newMigrationSecret();
    const { relay, received } = await tlsTarget(secret);
    const peer = await connectOutgoing("127.0.0.1", relay.port, secret, sourceTls());
    cleanup.push(() => peer.destroy());
    peer.write("QEVM-stream-bytes");
    await until(() => received().toString() === "QEVM-stream-bytes");
  });

  it("refuses a wrong secret without forwarding a byte, and still accepts the right one", async () => {
    const secret = newMigrationSecret();
    const { relay, received } = await tlsTarget(secret);
    await expect(connectOutgoing("127.0.0.1", relay.port, newMigrationSecret(), sourceTls())).rejects.toBeInstanceOf(
      MigrationAuthError,
    );
    expect(received().length).toBe(0);
    const peer = await connectOutgoing("127.0.0.1", relay.port, secret, sourceTls());
    cleanup.push(() => peer.destroy());
    peer.write("ok");
    await until(() => received().toString() === "ok");
  });

  it("refuses certificates other than the pinned ones, on either side, naming the cause", async () => {
    const secret = newMigrationSecret();
    const { relay, received } = await tlsTarget(secret);
    // The source pins another target certificate than the one the target presents.
    await expect(
      connectOutgoing("127.0.0.1", relay.port, secret, { ...tls.source, peerCertificate: stranger.certificate }),
    ).rejects.toThrow(/the target presented another certificate than the one its virt-handler gave/);
    // The source presents a certificate the target's handler never got.
    await expect(
      connectOutgoing("127.0.0.1", relay.port, secret, { ...stranger, peerCertificate: tls.target.certificate }),
    ).rejects.toThrow(/the peer refused this side's certificate|peer closed the connection/);
    expect(received().length).toBe(0);
    const peer = await connectOutgoing("127.0.0.1", relay.port, secret, sourceTls());
    cleanup.push(() => peer.destroy());
    peer.write("still-ok");
    await until(() => received().toString() === "still-ok");
  });

  it("carries the stream as TLS records on the TCP hop: a ClientHello first, no plaintext", async () => {
    const secret = newMigrationSecret();
    const { relay, received } = await tlsTarget(secret);
    const mitm = await recorder(relay.port);
    cleanup.push(() => mitm.server.close());
    const secretText = Buffer.alloc(100_000, "guest-memory-page ");
    const peer = await connectOutgoing("127.0.0.1", mitm.port, secret, sourceTls());
    cleanup.push(() => peer.destroy());
    peer.write(secretText);
    await until(() => received().length === secretText.length);
    expect(received().equals(secretText)).toBe(true);
    const onWire = mitm.wire();
    expect([...onWire.subarray(0, 3)]).toEqual([0x16, 0x03, 0x01]); // a TLS handshake record
    expect(onWire.length).toBeGreaterThan(secretText.length);
    expect(onWire.includes(Buffer.from("guest-memory-page"))).toBe(false);
    expect(onWire.includes(Buffer.from("KVTQMIG"))).toBe(false); // even the inner handshake is inside TLS
  });

  it("ends the stream at a tampered record without passing it to QEMU", async () => {
    const secret = newMigrationSecret();
    const { relay, received } = await tlsTarget(secret);
    let altered = false;
    const mitm = await recorder(relay.port, (out, seen) => {
      // The first byte past 8 KiB of the source's bytes: inside an application data record of the stream.
      const at = 8192 - seen;
      if (at >= 0 && at < out.length) {
        out[at] = (out[at] ?? 0) ^ 1;
        altered = true;
      }
    });
    cleanup.push(() => mitm.server.close());
    const peer = await connectOutgoing("127.0.0.1", mitm.port, secret, sourceTls());
    peer.on("error", () => undefined);
    const ended = new Promise<void>((r) => peer.on("close", () => r()));
    peer.resume();
    peer.write(Buffer.alloc(20_000, "x"));
    await ended; // the target relay dropped the connection
    expect(altered).toBe(true);
    await until(() => mitm.upstream()?.destroyed === true);
    // Records before the tampered one may have reached QEMU; nothing from the tampered one on.
    expect(received().length).toBeLessThan(8192);
  });

  it("carries a plain stream when both ends disable TLS, and refuses a peer in the other mode by name", async () => {
    const qemu = await fakeQemu(sock);
    const secret = newMigrationSecret();
    const relay = await IncomingRelay.listen("127.0.0.1", secret, sock, logger, { tls: false });
    cleanup.push(
      () => qemu.server.close(),
      () => relay.close(),
    );
    await expect(connectOutgoing("127.0.0.1", relay.port, secret, sourceTls())).rejects.toThrow(
      /does not speak TLS .*KubeVirt's migrations.disableTLS must be the same at both ends/,
    );
    const peer = await connectOutgoing("127.0.0.1", relay.port, secret, false);
    cleanup.push(() => peer.destroy());
    peer.write("plain-QEVM");
    await until(() => qemu.received().toString() === "plain-QEVM");
  });

  it("a TLS target refuses a plain source by name", async () => {
    const secret = newMigrationSecret();
    const { relay, received } = await tlsTarget(secret);
    await expect(connectOutgoing("127.0.0.1", relay.port, secret, false)).rejects.toThrow(
      /the target runs the migration over TLS and this side does not: KubeVirt's migrations.disableTLS must be the same/,
    );
    expect(received().length).toBe(0);
  });

  it("drops a peer that speaks another protocol", async () => {
    const qemu = await fakeQemu(sock);
    const relay = await IncomingRelay.listen("127.0.0.1", newMigrationSecret(), sock, logger, { tls: false });
    cleanup.push(
      () => qemu.server.close(),
      () => relay.close(),
    );
    const s: Socket = connect({ host: "127.0.0.1", port: relay.port });
    cleanup.push(() => s.destroy());
    const closed = new Promise<void>((r) => s.on("close", () => r()));
    s.on("error", () => undefined);
    s.resume();
    s.write(Buffer.alloc(72, 0x41)); // right length, wrong magic
    await closed;
    expect(qemu.received().length).toBe(0);
  });

  it("a source refuses a target that cannot prove the secret", async () => {
    // A fake plain "target" that answers the source's hello with its magic and garbage instead of its MAC.
    const server = createServer((s) => {
      s.once("data", () => s.write(Buffer.concat([Buffer.from("KVTQMIG3"), Buffer.alloc(64, 1)])));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    cleanup.push(() => server.close());
    const port = (server.address() as { port: number }).port;
    await expect(connectOutgoing("127.0.0.1", port, newMigrationSecret(), false)).rejects.toThrow(
      /target failed authentication/,
    );
  });
});
