/**
 * The migration stream's encryption in TypeScript (node:crypto), byte for byte the format of our VMM's stream
 * (native/src/migration/sealed_channel.h has the definition; native/test/migration/sealed-vector.txt is the vector
 * both implementations are checked against). Used by the QEMU relay (apps/virt-launcher migration-relay.ts), whose
 * TCP hop carries QEMU's stream between two launchers.
 *
 *   keys:   prk = HKDF-Extract(salt = source nonce | target nonce, ikm = secret)
 *           key (16) | iv (12) = HKDF-Expand(prk, "kvt-migration source->target" | "kvt-migration target->source")
 *   record: 0x17 0x03 0x03 | u16 length | AES-128-GCM(plaintext | 0x17) | tag (16)    (TLS 1.3's record layer)
 *           nonce = iv XOR sequence number (u64 big-endian, right-aligned); additional data = the 5-byte header
 */
import { createCipheriv, createDecipheriv, hkdfSync } from "node:crypto";
import { Duplex } from "node:stream";

/** One direction's key and static IV. */
export interface TrafficKeys {
  readonly key: Buffer;
  readonly iv: Buffer;
}

/** Both directions' keys of one connection. */
export interface SessionKeys {
  readonly sourceToTarget: TrafficKeys;
  readonly targetToSource: TrafficKeys;
}

/** Largest plaintext of one record (TLS's 2^14). */
export const MAX_RECORD_PLAINTEXT = 16384;
const HEADER = 5;
const TAG = 16;
const APPLICATION_DATA = 0x17;
const MAX_BODY = MAX_RECORD_PLAINTEXT + 1 + TAG;

/** A record that is not authentic, not a record at all, or cut short: the stream must end. */
export class SealError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SealError";
  }
}

/** The keys of a connection from its secret and the handshake's two nonces. */
export function deriveSessionKeys(secret: string, sourceNonce: Uint8Array, targetNonce: Uint8Array): SessionKeys {
  const salt = Buffer.concat([sourceNonce, targetNonce]);
  const derive = (info: string): TrafficKeys => {
    const b = Buffer.from(hkdfSync("sha256", Buffer.from(secret), salt, info, 28));
    return { key: b.subarray(0, 16), iv: b.subarray(16) };
  };
  return {
    sourceToTarget: derive("kvt-migration source->target"),
    targetToSource: derive("kvt-migration target->source"),
  };
}

function nonce(iv: Buffer, seq: bigint): Buffer {
  const n = Buffer.from(iv);
  const s = Buffer.alloc(8);
  s.writeBigUInt64BE(seq);
  for (let i = 0; i < 8; i++) n[4 + i] = n[4 + i] ^ s[i];
  return n;
}

function header(bodyLength: number): Buffer {
  return Buffer.from([APPLICATION_DATA, 3, 3, bodyLength >> 8, bodyLength & 0xff]);
}

/** Seals plaintext into records, numbering them from 0. */
export class RecordSealer {
  #seq = 0n;
  readonly #keys: TrafficKeys;
  constructor(keys: TrafficKeys) {
    this.#keys = keys;
  }
  /** The records carrying `data` (at most 16 KiB of it each), concatenated. */
  seal(data: Uint8Array): Buffer {
    const out: Buffer[] = [];
    for (let at = 0; at < data.length; at += MAX_RECORD_PLAINTEXT) {
      const chunk = data.subarray(at, at + MAX_RECORD_PLAINTEXT);
      const h = header(chunk.length + 1 + TAG);
      const c = createCipheriv("aes-128-gcm", this.#keys.key, nonce(this.#keys.iv, this.#seq++));
      c.setAAD(h);
      out.push(h, c.update(chunk), c.update(Buffer.of(APPLICATION_DATA)), c.final(), c.getAuthTag());
    }
    return Buffer.concat(out);
  }
}

/** Opens records from a byte stream in any pieces; throws SealError on anything not authentic. */
export class RecordOpener {
  #seq = 0n;
  #buffered: Buffer = Buffer.alloc(0);
  readonly #keys: TrafficKeys;
  constructor(keys: TrafficKeys) {
    this.#keys = keys;
  }
  /** The plaintext of every record `chunk` completes. */
  push(chunk: Uint8Array): Buffer[] {
    this.#buffered = this.#buffered.length === 0 ? Buffer.from(chunk) : Buffer.concat([this.#buffered, chunk]);
    const out: Buffer[] = [];
    while (this.#buffered.length >= HEADER) {
      const h = this.#buffered.subarray(0, HEADER);
      const bodyLength = h.readUInt16BE(3);
      if (h[0] !== APPLICATION_DATA || h[1] !== 3 || h[2] !== 3 || bodyLength < 1 + TAG || bodyLength > MAX_BODY)
        throw new SealError("not a sealed record (is encryption on at both ends?)");
      if (this.#buffered.length < HEADER + bodyLength) break;
      const body = this.#buffered.subarray(HEADER, HEADER + bodyLength);
      this.#buffered = this.#buffered.subarray(HEADER + bodyLength);
      const d = createDecipheriv("aes-128-gcm", this.#keys.key, nonce(this.#keys.iv, this.#seq++));
      d.setAAD(h);
      d.setAuthTag(body.subarray(body.length - TAG));
      let plain: Buffer;
      try {
        plain = Buffer.concat([d.update(body.subarray(0, body.length - TAG)), d.final()]);
      } catch {
        throw new SealError("a record failed authentication (tampered, cut or reordered)");
      }
      if (plain[plain.length - 1] !== APPLICATION_DATA) throw new SealError("a record of an unexpected type");
      if (plain.length > 1) out.push(plain.subarray(0, plain.length - 1));
    }
    return out;
  }
  /** Throws when the stream ended inside a record. */
  end(): void {
    if (this.#buffered.length > 0) throw new SealError("connection closed in the middle of a record");
  }
}

/**
 * A Duplex over `socket` that seals what is written to it with `send` and opens what arrives with `recv`. A record
 * that fails to open destroys both with the SealError; the socket's end ends the readable side.
 */
export function sealedDuplex(
  socket: Duplex,
  send: TrafficKeys,
  recv: TrafficKeys,
  leftover: Uint8Array = Buffer.alloc(0),
): Duplex {
  const sealer = new RecordSealer(send);
  const opener = new RecordOpener(recv);
  const fail = (err: Error): void => {
    socket.destroy();
    duplex.destroy(err);
  };
  const deliver = (chunk: Uint8Array): void => {
    try {
      for (const p of opener.push(chunk)) if (!duplex.push(p)) socket.pause();
    } catch (err) {
      fail(err as Error);
    }
  };
  const duplex = new Duplex({
    read: () => {
      socket.resume();
    },
    write: (chunk: Buffer, _enc, cb) => {
      socket.write(sealer.seal(chunk), cb);
    },
    final: (cb) => {
      if (socket.writableEnded || socket.destroyed) cb();
      else socket.end(() => cb());
    },
    destroy: (err, cb) => {
      socket.destroy();
      cb(err);
    },
  });
  let ended = false;
  socket.on("data", deliver);
  socket.on("end", () => {
    try {
      opener.end();
      ended = true;
      duplex.push(null);
    } catch (err) {
      fail(err as Error);
    }
  });
  socket.on("error", (err) => duplex.destroy(err));
  // After an orderly end the readable side drains on its own; a close without one is a failure.
  socket.on("close", () => {
    if (!ended) duplex.destroy();
  });
  if (leftover.length > 0) deliver(leftover);
  return duplex;
}
