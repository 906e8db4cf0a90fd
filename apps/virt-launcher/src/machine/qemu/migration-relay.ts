/**
 * Carries QEMU's migration stream between two launchers through our authenticated, encrypted channel. QEMU itself
 * only ever talks to a local unix socket; the TCP hop between hosts is ours and starts with a mutual HMAC-SHA256
 * handshake over the per-migration secret. Not one byte of the stream is forwarded before both sides have proven the
 * secret, and every byte after the handshake travels sealed (AES-128-GCM records under keys derived from the secret
 * and both nonces: @kvt/migration/seal, the same record layer as our VMM's stream).
 *
 *   source QEMU --unix--> source relay                        target relay --unix--> target QEMU (-incoming)
 *                              |  TCP connect                      | (listening on host:port)
 *                              |<---- MAGIC | nonceT(32) ----------|
 *                              |---- MAGIC | nonceS(32) | macS --->|  macS = HMAC(secret, "source" | nonceT | nonceS)
 *                              |                                   |  verify, else close (QEMU never sees the peer)
 *                              |<---------------- macT ------------|  macT = HMAC(secret, "target" | nonceS | nonceT)
 *                  verify, else close
 *                              |<===== sealed QEMU stream ========>|  (both directions: QEMU's return path)
 *
 * MAGIC = "KVTQMIG2" (8 bytes: protocol and version; 2 = sealed), or "KVTQMIG1" for a plain stream (KubeVirt's
 * migrations.disableTLS, at both ends): a side that expects the other mode refuses the peer as a wrong protocol. Each step has a deadline; a wrong secret, a short read or a
 * wrong magic ends that connection only, and the target keeps listening for the real source until it is closed.
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { connect, createServer, type Server, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import { deriveSessionKeys, sealedDuplex } from "@kvt/migration/seal";
import type { Logger } from "@kvt/observability";

const SEALED_MAGIC = Buffer.from("KVTQMIG2");
const PLAIN_MAGIC = Buffer.from("KVTQMIG1");
const MAGIC_LENGTH = 8;
const magicOf = (encrypt: boolean): Buffer => (encrypt ? SEALED_MAGIC : PLAIN_MAGIC);
const NONCE = 32;
const MAC = 32;
const HANDSHAKE_TIMEOUT_MS = 10_000;

/** The handshake failed: wrong secret, wrong protocol, or the peer went away. */
export class MigrationAuthError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "MigrationAuthError";
  }
}

/** A fresh per-migration secret (256 bits, hex). */
export function newMigrationSecret(): string {
  return randomBytes(32).toString("hex");
}

function mac(secret: string, role: "source" | "target", first: Buffer, second: Buffer): Buffer {
  return createHmac("sha256", secret).update(role).update(first).update(second).digest();
}

/** Reads exactly `n` bytes from `socket` (paused-mode reads), keeping any surplus for the next read. */
class ExactReader {
  #buffered = Buffer.alloc(0);
  #want = 0;
  #resolve?: (b: Buffer) => void;
  #reject?: (e: Error) => void;
  readonly #socket: Socket;
  readonly #onData = (chunk: Buffer): void => {
    this.#buffered = Buffer.concat([this.#buffered, chunk]);
    this.#drain();
  };
  readonly #onEnd = (): void =>
    this.#reject?.(new MigrationAuthError("peer closed the connection during the handshake"));
  constructor(socket: Socket) {
    this.#socket = socket;
    socket.on("data", this.#onData);
    socket.on("end", this.#onEnd);
    socket.on("close", this.#onEnd);
    socket.on("error", this.#onEnd);
  }
  read(n: number): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      this.#want = n;
      this.#resolve = resolve;
      this.#reject = reject;
      this.#drain();
    });
  }
  #drain(): void {
    if (this.#resolve && this.#buffered.length >= this.#want) {
      const out = this.#buffered.subarray(0, this.#want);
      this.#buffered = this.#buffered.subarray(this.#want);
      const r = this.#resolve;
      this.#resolve = undefined;
      this.#reject = undefined;
      r(out);
    }
  }
  /** Stops reading; returns bytes received beyond the handshake. */
  detach(): Buffer {
    this.#socket.off("data", this.#onData);
    this.#socket.off("end", this.#onEnd);
    this.#socket.off("close", this.#onEnd);
    this.#socket.off("error", this.#onEnd);
    return this.#buffered;
  }
}

function withDeadline<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new MigrationAuthError(`${what} timed out`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Joins QEMU's local socket and the remote channel in both directions. Data always drains before an orderly end
 * is passed on. When `abortLocalOnRemoteEnd` (the source side), a remote end that comes while QEMU is still
 * sending destroys QEMU's socket, so QEMU sees the failure at once instead of writing into a dead channel.
 */
function splice(local: Socket, remote: Duplex, abortLocalOnRemoteEnd: boolean): void {
  let localEnded = false;
  local.on("end", () => {
    localEnded = true;
  });
  local.pipe(remote);
  remote.pipe(local, { end: !abortLocalOnRemoteEnd });
  const remoteGone = (): void => {
    if (abortLocalOnRemoteEnd && !localEnded) local.destroy();
    else local.end();
  };
  remote.on("end", remoteGone);
  remote.on("close", remoteGone);
  remote.on("error", () => local.destroy());
  local.on("error", () => remote.destroy());
  local.on("close", () => remote.end());
}

/** Target side: a TCP listener that authenticates the source and then connects it to QEMU's unix socket. */
export class IncomingRelay {
  readonly #server: Server;
  readonly #secret: string;
  readonly #qemuSocket: string;
  readonly #log: Logger;
  readonly #encrypt: boolean;
  #accepted = false;

  private constructor(server: Server, secret: string, qemuSocket: string, log: Logger, encrypt: boolean) {
    this.#server = server;
    this.#secret = secret;
    this.#qemuSocket = qemuSocket;
    this.#log = log;
    this.#encrypt = encrypt;
    server.on("connection", (s) => void this.#onConnection(s));
  }

  /**
   * Listens on `host`:`port` (default ephemeral) for a source knowing `secret`; forwards it to `qemuSocket`.
   * `encrypt` (default true): the stream arrives sealed; false only under KubeVirt's migrations.disableTLS.
   */
  static async listen(
    host: string,
    secret: string,
    qemuSocket: string,
    log: Logger,
    { port = 0, encrypt = true }: { port?: number; encrypt?: boolean } = {},
  ): Promise<IncomingRelay> {
    const server = createServer({ pauseOnConnect: false });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, host, () => resolve());
    });
    return new IncomingRelay(server, secret, qemuSocket, log, encrypt);
  }

  /** The port it listens on. */
  get port(): number {
    const a = this.#server.address();
    return typeof a === "object" && a ? a.port : 0;
  }

  /** Stops listening (an accepted stream keeps flowing). */
  close(): void {
    this.#server.close();
  }

  async #onConnection(socket: Socket): Promise<void> {
    const peer = `${socket.remoteAddress}:${socket.remotePort}`;
    if (this.#accepted) {
      socket.destroy();
      return;
    }
    const reader = new ExactReader(socket);
    try {
      const nonceT = randomBytes(NONCE);
      const magic = magicOf(this.#encrypt);
      socket.write(Buffer.concat([magic, nonceT]));
      const hello = await withDeadline(
        reader.read(MAGIC_LENGTH + NONCE + MAC),
        HANDSHAKE_TIMEOUT_MS,
        "migration handshake",
      );
      if (!hello.subarray(0, MAGIC_LENGTH).equals(magic)) throw new MigrationAuthError(badMagic(hello, this.#encrypt));
      const nonceS = hello.subarray(MAGIC_LENGTH, MAGIC_LENGTH + NONCE);
      const macS = hello.subarray(MAGIC_LENGTH + NONCE);
      if (!timingSafeEqual(macS, mac(this.#secret, "source", nonceT, nonceS)))
        throw new MigrationAuthError("migration peer failed authentication");
      if (this.#accepted) throw new MigrationAuthError("a migration source is already connected");
      this.#accepted = true;
      socket.write(mac(this.#secret, "target", nonceS, nonceT));
      const qemu = connect(this.#qemuSocket);
      if (this.#encrypt) {
        const keys = deriveSessionKeys(this.#secret, nonceS, nonceT);
        const sealed = sealedDuplex(socket, keys.targetToSource, keys.sourceToTarget, reader.detach());
        sealed.on("error", (err: Error) => this.#log.warn({ peer, err: err.message }, "migration stream ended"));
        splice(qemu, sealed, false);
      } else {
        const leftover = reader.detach();
        if (leftover.length > 0) qemu.write(leftover);
        splice(qemu, socket, false);
      }
      this.#server.close();
      this.#log.info({ peer }, "migration source authenticated; stream forwarded to QEMU");
    } catch (err) {
      reader.detach();
      this.#log.warn({ peer, err: (err as Error).message }, "migration connection refused");
      socket.destroy();
    }
  }
}

/** Why a peer's magic was refused: another protocol, or the same one in the other mode (disableTLS on one side). */
function badMagic(hello: Buffer, encrypt: boolean): string {
  if (hello.subarray(0, MAGIC_LENGTH).equals(magicOf(!encrypt)))
    return `the peer ${encrypt ? "does not encrypt" : "encrypts"} the migration stream and this side ${encrypt ? "does" : "does not"} (KubeVirt's migrations.disableTLS must be the same at both ends)`;
  return "not a kvt migration peer (bad magic)";
}

/**
 * Source side: connects to the target relay and proves the secret (and checks the target's proof). Resolves with
 * the channel over the authenticated socket: sealed (what is written to it travels encrypted) unless `encrypt` is
 * false (KubeVirt's migrations.disableTLS), then the socket itself.
 */
export async function connectOutgoing(host: string, port: number, secret: string, encrypt = true): Promise<Duplex> {
  const socket = await new Promise<Socket>((resolve, reject) => {
    const s = connect({ host, port });
    s.once("connect", () => {
      s.off("error", reject);
      resolve(s);
    });
    s.once("error", reject);
  });
  const reader = new ExactReader(socket);
  try {
    const hello = await withDeadline(reader.read(MAGIC_LENGTH + NONCE), HANDSHAKE_TIMEOUT_MS, "migration handshake");
    const magic = magicOf(encrypt);
    if (!hello.subarray(0, MAGIC_LENGTH).equals(magic)) throw new MigrationAuthError(badMagic(hello, encrypt));
    const nonceT = Buffer.from(hello.subarray(MAGIC_LENGTH));
    const nonceS = randomBytes(NONCE);
    socket.write(Buffer.concat([magic, nonceS, mac(secret, "source", nonceT, nonceS)]));
    const macT = await withDeadline(reader.read(MAC), HANDSHAKE_TIMEOUT_MS, "migration handshake");
    if (!timingSafeEqual(macT, mac(secret, "target", nonceS, nonceT)))
      throw new MigrationAuthError("target failed authentication");
    const leftover = reader.detach();
    if (leftover.length > 0) throw new MigrationAuthError("target sent data before the stream started");
    if (!encrypt) return socket;
    const keys = deriveSessionKeys(secret, nonceS, nonceT);
    return sealedDuplex(socket, keys.sourceToTarget, keys.targetToSource);
  } catch (err) {
    reader.detach();
    socket.destroy();
    throw err instanceof MigrationAuthError ? err : new MigrationAuthError((err as Error).message);
  }
}

/** Source side: a unix listener QEMU migrates into; its one connection is joined to the authenticated `peer`. */
export async function listenForQemu(path: string, peer: Duplex): Promise<Server> {
  const server = createServer((qemu) => {
    server.close();
    splice(qemu, peer, true);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(path, () => resolve());
  });
  return server;
}
