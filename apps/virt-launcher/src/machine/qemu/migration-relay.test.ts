import { mkdtempSync, rmSync } from "node:fs";
import { connect, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogger } from "@kvt/observability";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
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

describe("migration relay", () => {
  let dir: string;
  let sock: string;
  const cleanup: (() => void)[] = [];
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "kvt-relay-"));
    sock = join(dir, "in.sock");
  });
  afterEach(() => {
    for (const c of cleanup.splice(0)) c();
    rmSync(dir, { recursive: true, force: true });
  });

  it("forwards the stream to QEMU only after the mutual HMAC handshake", async () => {
    const qemu = await fakeQemu(sock);
    const secret = newMigrationSecret();
    const relay = await IncomingRelay.listen("127.0.0.1", secret, sock, logger);
    cleanup.push(
      () => qemu.server.close(),
      () => relay.close(),
    );
    const peer = await connectOutgoing("127.0.0.1", relay.port, secret);
    cleanup.push(() => peer.destroy());
    peer.write("QEVM-stream-bytes");
    await until(() => qemu.received().toString() === "QEVM-stream-bytes");
  });

  it("refuses a wrong secret without forwarding a byte, and still accepts the right one", async () => {
    const qemu = await fakeQemu(sock);
    const secret = newMigrationSecret();
    const relay = await IncomingRelay.listen("127.0.0.1", secret, sock, logger);
    cleanup.push(
      () => qemu.server.close(),
      () => relay.close(),
    );
    await expect(connectOutgoing("127.0.0.1", relay.port, newMigrationSecret())).rejects.toBeInstanceOf(
      MigrationAuthError,
    );
    expect(qemu.received().length).toBe(0);
    const peer = await connectOutgoing("127.0.0.1", relay.port, secret);
    cleanup.push(() => peer.destroy());
    peer.write("ok");
    await until(() => qemu.received().toString() === "ok");
  });

  it("carries the stream encrypted on the TCP hop", async () => {
    const qemu = await fakeQemu(sock);
    const secret = newMigrationSecret();
    const relay = await IncomingRelay.listen("127.0.0.1", secret, sock, logger);
    // A recorder between the source and the target relay: what an observer of the network sees.
    const wire: Buffer[] = [];
    const mitm = createServer((src) => {
      const dst = connect({ host: "127.0.0.1", port: relay.port });
      src.on("data", (c: Buffer) => {
        wire.push(Buffer.from(c));
        dst.write(c);
      });
      dst.pipe(src);
      src.on("error", () => dst.destroy());
      dst.on("error", () => src.destroy());
    });
    await new Promise<void>((r) => mitm.listen(0, "127.0.0.1", () => r()));
    const mitmPort = (mitm.address() as { port: number }).port;
    cleanup.push(
      () => qemu.server.close(),
      () => relay.close(),
      () => mitm.close(),
    );
    const secretText = Buffer.alloc(100_000, "guest-memory-page ");
    const peer = await connectOutgoing("127.0.0.1", mitmPort, secret);
    cleanup.push(() => peer.destroy());
    peer.write(secretText);
    await until(() => qemu.received().length === secretText.length);
    expect(qemu.received().equals(secretText)).toBe(true);
    const onWire = Buffer.concat(wire);
    expect(onWire.length).toBeGreaterThan(secretText.length);
    expect(onWire.includes(Buffer.from("guest-memory-page"))).toBe(false);
  });

  it("ends the stream at a tampered record without passing it to QEMU", async () => {
    const qemu = await fakeQemu(sock);
    const secret = newMigrationSecret();
    const relay = await IncomingRelay.listen("127.0.0.1", secret, sock, logger);
    let upstream: Socket | undefined;
    const mitm = createServer((src) => {
      const dst = connect({ host: "127.0.0.1", port: relay.port });
      upstream = dst;
      let seen = 0;
      src.on("data", (c: Buffer) => {
        const out = Buffer.from(c);
        const at = 200 - seen; // byte 200 of the source's bytes: inside the first sealed record
        if (at >= 0 && at < out.length) out[at] = out[at] ^ 1;
        seen += out.length;
        dst.write(out);
      });
      dst.pipe(src);
      src.on("error", () => dst.destroy());
      dst.on("error", () => src.destroy());
    });
    await new Promise<void>((r) => mitm.listen(0, "127.0.0.1", () => r()));
    cleanup.push(
      () => qemu.server.close(),
      () => relay.close(),
      () => mitm.close(),
    );
    const peer = await connectOutgoing("127.0.0.1", (mitm.address() as { port: number }).port, secret);
    peer.on("error", () => undefined);
    const ended = new Promise<void>((r) => peer.on("end", () => r()));
    peer.resume();
    peer.write(Buffer.alloc(5000, "x"));
    await ended; // the target relay dropped the connection
    await until(() => upstream?.destroyed === true);
    expect(qemu.received().length).toBe(0);
  });

  it("carries a plain stream when both ends disable TLS, and refuses a peer in the other mode by name", async () => {
    const qemu = await fakeQemu(sock);
    const secret = newMigrationSecret();
    const relay = await IncomingRelay.listen("127.0.0.1", secret, sock, logger, { encrypt: false });
    cleanup.push(
      () => qemu.server.close(),
      () => relay.close(),
    );
    await expect(connectOutgoing("127.0.0.1", relay.port, secret)).rejects.toThrow(
      /does not encrypt the migration stream and this side does \(KubeVirt's migrations.disableTLS must be the same/,
    );
    const peer = await connectOutgoing("127.0.0.1", relay.port, secret, false);
    cleanup.push(() => peer.destroy());
    peer.write("plain-QEVM");
    await until(() => qemu.received().toString() === "plain-QEVM");
  });

  it("drops a peer that speaks another protocol", async () => {
    const qemu = await fakeQemu(sock);
    const relay = await IncomingRelay.listen("127.0.0.1", newMigrationSecret(), sock, logger);
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
    // A fake "target" that sends a valid-looking hello, then garbage instead of its MAC.
    const server = createServer((s) => {
      s.write(Buffer.concat([Buffer.from("KVTQMIG2"), Buffer.alloc(32, 1)]));
      s.once("data", () => s.write(Buffer.alloc(32, 2)));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    cleanup.push(() => server.close());
    const port = (server.address() as { port: number }).port;
    await expect(connectOutgoing("127.0.0.1", port, newMigrationSecret())).rejects.toThrow(
      /target failed authentication/,
    );
  });
});
