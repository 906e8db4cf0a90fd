/**
 * Carries QEMU's migration stream between two launchers over our own authenticated, encrypted TCP hop. QEMU itself
 * only ever talks to a local unix socket. The hop runs over TLS 1.3 (node:tls) with the per-migration certificates
 * the two virt-handlers minted and exchanged, each side accepting exactly the peer certificate its handler gave it
 * (as our VMM's stream does: native/src/migration/tls.h); inside it, both sides prove the per-migration secret
 * (mutual HMAC-SHA256) before one byte of the stream is forwarded.
 *
 *   source QEMU --unix--> source relay                        target relay --unix--> target QEMU (-incoming)
 *                              |  TCP connect                      | (listening on host:port)
 *                              |==== TLS 1.3 handshake ===========>|  each side checks the pinned certificate
 *                              |---- MAGIC | nonceS(32) --------->|
 *                              |<--- MAGIC | nonceT(32) | macT ----|  macT = HMAC(secret, "target" | nonceS | nonceT)
 *                  verify, else close
 *                              |---- macS ----------------------->|  macS = HMAC(secret, "source" | nonceT | nonceS)
 *                              |                                   |  verify, else close (QEMU never sees the peer)
 *                              |<===== QEMU stream (TLS) ========>|  (both directions: QEMU's return path)
 *
 * MAGIC = "KVTQMIG4" inside TLS, or "KVTQMIG3" for a plain hop (KubeVirt's migrations.disableTLS, at both ends,
 * no TLS around it). The source speaks first, so each side recognises a peer in the other mode by its first bytes:
 * a plain target answers a TLS ClientHello with its magic (the source's handshake then fails and says so), a TLS
 * target answers a plain magic with its own, and each names the setting. Each step has a deadline; a wrong
 * certificate, secret or magic, or a short read, ends that connection only, and the target keeps listening for the
 * real source until it is closed.
 */
import { createHmac, randomBytes, timingSafeEqual, X509Certificate } from "node:crypto";
import { connect, createServer, type Server, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import { createServer as createTlsServer, type TLSSocket, connect as tlsConnect } from "node:tls";
import type { Logger } from "@kvt/observability";
import type { MigrationTlsIdentity } from "../machine.ts";

const TLS_MAGIC = Buffer.from("KVTQMIG4");
const PLAIN_MAGIC = Buffer.from("KVTQMIG3");
const MAGIC_LENGTH = 8;
const magicOf = (tls: boolean): Buffer => (tls ? TLS_MAGIC : PLAIN_MAGIC);
const NONCE = 32;
const MAC = 32;
const HANDSHAKE_TIMEOUT_MS = 10_000;
/** TLS 1.3 only, AES-128-GCM: what our VMM's stream speaks too. */
const TLS_VERSION = { minVersion: "TLSv1.3", maxVersion: "TLSv1.3", ciphersuites: "TLS_AES_128_GCM_SHA256" } as const;
const SETTING = "KubeVirt's migrations.disableTLS must be the same at both ends";

/** The handshake failed: wrong certificate, secret or protocol, or the peer went away. */
export class MigrationAuthError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "MigrationAuthError";
  }
}

/** The source side's TLS: its identity and the target's certificate, the only one it accepts. */
export interface RelayTls extends MigrationTlsIdentity {
  readonly peerCertificate: string;
}

/** A fresh per-migration secret (256 bits, hex). */
export function newMigrationSecret(): string {
  return randomBytes(32).toString("hex");
}

function mac(secret: string, role: "source" | "target", first: Buffer, second: Buffer): Buffer {
  return createHmac("sha256", secret).update(role).update(first).update(second).digest();
}

/** The DER bytes of a PEM certificate (for the exact comparison that pins it). */
function der(pem: string): Buffer {
  return new X509Certificate(pem).raw;
}

/** Whether a peer's certificate (DER; a Uint8Array on Deno, a Buffer on Node) is the pinned one, byte for byte. */
function samePinned(raw: Uint8Array | undefined, pinned: Buffer): boolean {
  return raw !== undefined && Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).equals(pinned);
}

/** Reads exactly `n` bytes from `socket` (paused-mode reads), keeping any surplus for the next read. */
class ExactReader {
  #buffered = Buffer.alloc(0);
  #want = 0;
  #resolve?: (b: Buffer) => void;
  #reject?: (e: Error) => void;
  #failure?: Error;
  readonly #socket: Duplex;
  readonly #onData = (chunk: Buffer): void => {
    this.#buffered = Buffer.concat([this.#buffered, chunk]);
    this.#drain();
  };
  readonly #onEnd = (): void => this.#fail(new MigrationAuthError("peer closed the connection during the handshake"));
  readonly #onError = (err: Error): void => this.#fail(new MigrationAuthError(describeTlsError(err)));
  constructor(socket: Duplex) {
    this.#socket = socket;
    socket.on("data", this.#onData);
    socket.on("end", this.#onEnd);
    socket.on("close", this.#onEnd);
    socket.on("error", this.#onError);
    socket.resume(); // a socket paused to peek at its first bytes flows again
  }
  read(n: number): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      this.#want = n;
      this.#resolve = resolve;
      this.#reject = reject;
      this.#drain();
      if (this.#failure !== undefined && this.#reject === reject) this.#fail(this.#failure);
    });
  }
  #fail(error: Error): void {
    this.#failure ??= error; // the first cause (an alert's error comes before the close)
    const reject = this.#reject;
    this.#resolve = undefined;
    this.#reject = undefined;
    reject?.(this.#failure);
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
    this.#socket.off("error", this.#onError);
    return this.#buffered;
  }
}

/** OpenSSL's reason of a TLS error ("wrong version number"), without its multi-line location. */
function sslReason(err: Error): string {
  const reason = (err as Error & { reason?: unknown }).reason;
  return typeof reason === "string" && reason ? reason : (err.message.split("\n")[0] ?? err.message);
}

/** A TLS error in words: the peer's refusal of our certificate, or a peer that does not speak TLS. */
function describeTlsError(err: Error): string {
  const m = sslReason(err);
  if (/alert (bad certificate|certificate unknown|unknown ca|certificate required|certificate expired)/i.test(m))
    return `the peer refused this side's certificate (${m})`;
  if (/wrong version number|packet length too long|unexpected message|record layer failure/i.test(m))
    return `the peer does not speak TLS (${m}): ${SETTING}`;
  return m;
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
  // A TLS socket that fails (a record that does not authenticate) emits its error without ending itself.
  remote.on("error", () => {
    local.destroy();
    remote.destroy();
  });
  local.on("error", () => remote.destroy());
  local.on("close", () => remote.end());
}

/** The first chunk a fresh socket receives (the source speaks first), put back for whoever reads next. */
function firstChunk(socket: Socket): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer): void => {
      cleanup();
      socket.pause();
      socket.unshift(chunk);
      resolve(chunk);
    };
    const onEnd = (): void => {
      cleanup();
      reject(new MigrationAuthError("peer closed the connection before it said anything"));
    };
    const cleanup = (): void => {
      socket.off("data", onData);
      socket.off("end", onEnd);
      socket.off("error", onEnd);
    };
    socket.on("data", onData);
    socket.on("end", onEnd);
    socket.on("error", onEnd);
  });
}

/** Target side: a TCP listener that authenticates the source and then connects it to QEMU's unix socket. */
export class IncomingRelay {
  readonly #server: Server;
  readonly #secret: string;
  readonly #qemuSocket: string;
  readonly #log: Logger;
  readonly #tls: MigrationTlsIdentity | false;
  #sourceCertificate?: string;
  #accepted = false;

  private constructor(
    server: Server,
    secret: string,
    qemuSocket: string,
    log: Logger,
    tls: MigrationTlsIdentity | false,
  ) {
    this.#server = server;
    this.#secret = secret;
    this.#qemuSocket = qemuSocket;
    this.#log = log;
    this.#tls = tls;
    server.on("connection", (s) => void this.#onConnection(s));
  }

  /**
   * Listens on `host`:`port` (default ephemeral) for a source knowing `secret`; forwards it to `qemuSocket`. `tls`:
   * this side's identity (the source must present the certificate given to trustSource()), or `false` only under
   * KubeVirt's migrations.disableTLS.
   */
  static async listen(
    host: string,
    secret: string,
    qemuSocket: string,
    log: Logger,
    { port = 0, tls }: { port?: number; tls: MigrationTlsIdentity | false },
  ): Promise<IncomingRelay> {
    const server = createServer({ pauseOnConnect: false });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, host, () => resolve());
    });
    return new IncomingRelay(server, secret, qemuSocket, log, tls);
  }

  /** The port it listens on. */
  get port(): number {
    const a = this.#server.address();
    return typeof a === "object" && a ? a.port : 0;
  }

  /** The source's certificate (PEM): the only one the TLS handshake accepts. Throws once a source connected. */
  trustSource(certificate: string): void {
    if (this.#tls === false) throw new MigrationAuthError(`this target runs without TLS: ${SETTING}`);
    if (this.#accepted) throw new MigrationAuthError("a migration source is already connected");
    der(certificate); // unreadable: throws now, not at the handshake
    this.#sourceCertificate = certificate;
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
    socket.on("error", () => undefined); // failures surface through the handshake below
    let channel: Socket = socket;
    let reader: ExactReader | undefined;
    try {
      const first = await withDeadline(firstChunk(socket), HANDSHAKE_TIMEOUT_MS, "migration handshake");
      const clientHello = first[0] === 0x16;
      if (this.#tls && !clientHello) {
        socket.end(Buffer.concat([TLS_MAGIC, Buffer.alloc(NONCE + MAC)])); // a plain source reads our mode
        throw new MigrationAuthError(
          `the source sent an unencrypted migration stream and this target expects TLS: ${SETTING}`,
        );
      }
      if (!this.#tls && clientHello) {
        socket.end(Buffer.concat([PLAIN_MAGIC, Buffer.alloc(NONCE + MAC)])); // not TLS: the source's handshake fails
        throw new MigrationAuthError(`the source speaks TLS and this target expects an unencrypted stream: ${SETTING}`);
      }
      if (this.#tls) channel = await this.#secure(socket, this.#tls);
      reader = new ExactReader(channel);
      const magic = magicOf(this.#tls !== false);
      const hello = await withDeadline(reader.read(MAGIC_LENGTH + NONCE), HANDSHAKE_TIMEOUT_MS, "migration handshake");
      if (!hello.subarray(0, MAGIC_LENGTH).equals(magic)) throw new MigrationAuthError(badMagic(hello));
      const nonceS = Buffer.from(hello.subarray(MAGIC_LENGTH));
      const nonceT = randomBytes(NONCE);
      channel.write(Buffer.concat([magic, nonceT, mac(this.#secret, "target", nonceS, nonceT)]));
      const macS = await withDeadline(reader.read(MAC), HANDSHAKE_TIMEOUT_MS, "migration handshake");
      if (!timingSafeEqual(macS, mac(this.#secret, "source", nonceT, nonceS)))
        throw new MigrationAuthError("migration peer failed authentication");
      if (this.#accepted) throw new MigrationAuthError("a migration source is already connected");
      this.#accepted = true;
      const qemu = connect(this.#qemuSocket);
      const leftover = reader.detach();
      if (leftover.length > 0) qemu.write(leftover);
      channel.on("error", (err: Error) => this.#log.warn({ peer, err: sslReason(err) }, "migration stream ended"));
      if (channel !== socket) channel.on("close", () => socket.destroy()); // the TCP connection ends with TLS
      splice(qemu, channel, false);
      this.#server.close();
      this.#log.info({ peer, tls: this.#tls !== false }, "migration source authenticated; stream forwarded to QEMU");
    } catch (err) {
      reader?.detach();
      this.#log.warn({ peer, err: (err as Error).message }, "migration connection refused");
      if (channel !== socket) channel.destroy();
      setTimeout(() => socket.destroy(), 100).unref(); // our last words (an alert, a magic) reach the source first
    }
  }

  /** The TLS handshake as server: the source must present exactly the certificate its handler sent ours. */
  async #secure(socket: Socket, tls: MigrationTlsIdentity): Promise<TLSSocket> {
    const pinned = this.#sourceCertificate;
    if (!pinned) throw new MigrationAuthError("a source connected before its certificate was given to this target");
    // A TLS server for this one connection (its trust: the pinned certificate at this moment), handed the socket;
    // its sockets report stream errors (a record that does not authenticate) where a bare server TLSSocket would not.
    const server = createTlsServer({
      cert: tls.certificate,
      key: tls.key,
      ca: [pinned],
      ...TLS_VERSION,
      requestCert: true,
      rejectUnauthorized: true,
    });
    const secured = await withDeadline(
      new Promise<TLSSocket>((resolve, reject) => {
        server.once("secureConnection", resolve);
        // A source that goes away mid-handshake is a tlsClientError too (Deno's wrap closes the raw socket when it
        // takes it over, so its "close" says nothing); one that stalls, the deadline's.
        server.once("tlsClientError", (err: Error) => reject(new MigrationAuthError(describeSourceRefusal(err))));
        server.emit("connection", socket);
      }),
      HANDSHAKE_TIMEOUT_MS,
      "TLS handshake",
    );
    if (!samePinned(secured.getPeerCertificate().raw, der(pinned))) {
      secured.destroy();
      throw new MigrationAuthError("the source presented another certificate than the one its virt-handler gave");
    }
    return secured;
  }
}

function describeSourceRefusal(err: Error): string {
  if (/certificate|verify/i.test(err.message))
    return `the source presented a certificate other than the one its virt-handler gave (${sslReason(err)})`;
  return describeTlsError(err);
}

/** Why a peer's magic was refused: another protocol, or the same one in the other mode (disableTLS on one side). */
function badMagic(hello: Buffer): string {
  const magic = hello.subarray(0, MAGIC_LENGTH);
  if (magic.equals(TLS_MAGIC)) return `the target runs the migration over TLS and this side does not: ${SETTING}`;
  if (magic.equals(PLAIN_MAGIC)) return `the peer sent a plain magic inside TLS: ${SETTING}`;
  return `not a kvt migration peer of this version (magic ${JSON.stringify(magic.toString("latin1"))})`;
}

/**
 * Source side: connects to the target relay, runs the TLS handshake (the target's certificate pinned) unless `tls`
 * is false (KubeVirt's migrations.disableTLS), proves the secret and checks the target's proof. Resolves with the
 * authenticated channel: the TLS socket, or the plain one.
 */
export async function connectOutgoing(
  host: string,
  port: number,
  secret: string,
  tls: RelayTls | false,
): Promise<Duplex> {
  const channel = tls ? await secureConnect(host, port, tls) : await plainConnect(host, port);
  const reader = new ExactReader(channel);
  try {
    const magic = magicOf(tls !== false);
    const nonceS = randomBytes(NONCE);
    channel.write(Buffer.concat([magic, nonceS]));
    const reply = await withDeadline(
      reader.read(MAGIC_LENGTH + NONCE + MAC),
      HANDSHAKE_TIMEOUT_MS,
      "migration handshake",
    );
    if (!reply.subarray(0, MAGIC_LENGTH).equals(magic)) throw new MigrationAuthError(badMagic(reply));
    const nonceT = Buffer.from(reply.subarray(MAGIC_LENGTH, MAGIC_LENGTH + NONCE));
    if (!timingSafeEqual(reply.subarray(MAGIC_LENGTH + NONCE), mac(secret, "target", nonceS, nonceT)))
      throw new MigrationAuthError("target failed authentication");
    channel.write(mac(secret, "source", nonceT, nonceS));
    const leftover = reader.detach();
    if (leftover.length > 0) throw new MigrationAuthError("target sent data before the stream started");
    return channel;
  } catch (err) {
    reader.detach();
    channel.destroy();
    throw err instanceof MigrationAuthError ? err : new MigrationAuthError((err as Error).message);
  }
}

function plainConnect(host: string, port: number): Promise<Socket> {
  return new Promise<Socket>((resolve, reject) => {
    const s = connect({ host, port });
    s.once("connect", () => {
      s.off("error", reject);
      resolve(s);
    });
    s.once("error", reject);
  });
}

/** TLS as client: the target must present exactly the certificate its handler gave ours. */
function secureConnect(host: string, port: number, tls: RelayTls): Promise<TLSSocket> {
  const pinned = der(tls.peerCertificate);
  const promise = new Promise<TLSSocket>((resolve, reject) => {
    const s = tlsConnect({
      host,
      port,
      cert: tls.certificate,
      key: tls.key,
      ca: [tls.peerCertificate],
      ...TLS_VERSION,
      // No names: the certificate is pinned, byte for byte.
      checkServerIdentity: (_host, cert) =>
        samePinned(cert.raw, pinned)
          ? undefined
          : new Error("the target presented another certificate than the one its virt-handler gave"),
    });
    s.once("secureConnect", () => {
      s.off("error", onError);
      resolve(s);
    });
    const onError = (err: Error): void => {
      s.destroy();
      const pinFailure =
        /self[- ]signed|unable to verify|certificate/i.test(err.message) && !/alert/i.test(err.message);
      reject(
        new MigrationAuthError(
          pinFailure
            ? `the target presented another certificate than the one its virt-handler gave (${sslReason(err)})`
            : describeTlsError(err),
        ),
      );
    };
    s.once("error", onError);
  });
  return withDeadline(promise, HANDSHAKE_TIMEOUT_MS, "TLS handshake");
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
