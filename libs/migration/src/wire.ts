/**
 * A decoder of the migration wire format (native/src/migration/stream.h has the protocol diagram and is the
 * implementation). Used to inspect captured streams and to check the C++ encoder against an independent one:
 *
 *   header (16 bytes, little-endian): u16 command | u8 flags | u8 reserved | u32 crc32c | u64 length
 *   crc32c = CRC-32C of the header with the crc field zeroed, then of the checked payload bytes
 *            (all of it with flag bit 0; a Memory frame without it checks only its range table)
 */

/** Command numbers on the wire. */
export const WIRE_COMMANDS = {
  Hello: 1,
  Challenge: 2,
  Auth: 3,
  AuthOk: 4,
  Start: 5,
  Memory: 6,
  Zero: 7,
  State: 8,
  Complete: 9,
  Resumed: 10,
  Abandon: 11,
  Sync: 12,
  Populate: 13,
  /** A copied disk's bytes: {u32 disk, u32 reserved, u64 offset, u64 length} + data (protocol 4). */
  Disk: 14,
  /** A copied disk's range that reads as zeros: {u32 disk, u32 reserved, u64 offset, u64 length} (protocol 4). */
  DiskZero: 15,
  /** Before Complete in a plaintext stream with copied disks: {u64 digest, u64 data bytes}, XXH64 chained over
   *  every Disk/DiskZero frame's extent and data (protocol 6). */
  DiskDigest: 16,
} as const;

const NAMES = Object.fromEntries(Object.entries(WIRE_COMMANDS).map(([k, v]) => [v, k])) as Record<number, string>;

/** One decoded frame. */
export interface DecodedFrame {
  readonly command: string;
  readonly flags: number;
  readonly length: number;
  readonly crcOk: boolean;
  readonly payload: Uint8Array;
}

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    t[i] = c >>> 0;
  }
  return t;
})();

/** CRC-32C, extendable: crc32c(b, crc32c(a)) === crc32c(a ++ b). */
export function crc32c(data: Uint8Array, crc = 0): number {
  let c = ~crc >>> 0;
  for (const byte of data) c = (CRC_TABLE[(c ^ byte) & 0xff] ?? 0) ^ (c >>> 8);
  return ~c >>> 0;
}

/** Splits `bytes` into frames, checking each CRC. Throws RangeError on a truncated or unknown frame. */
export function decodeFrames(bytes: Uint8Array): DecodedFrame[] {
  const out: DecodedFrame[] = [];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = 0;
  while (at < bytes.length) {
    if (bytes.length - at < 16) throw new RangeError(`truncated header at byte ${at}`);
    const command = view.getUint16(at, true);
    const flags = view.getUint8(at + 2);
    const crc = view.getUint32(at + 4, true);
    const length = Number(view.getBigUint64(at + 8, true));
    const name = NAMES[command];
    if (!name) throw new RangeError(`unknown command ${command} at byte ${at}`);
    if (bytes.length - at - 16 < length) throw new RangeError(`truncated ${name} payload at byte ${at}`);
    const header = bytes.slice(at, at + 16);
    header.fill(0, 4, 8);
    const payload = bytes.subarray(at + 16, at + 16 + length);
    let checked = payload;
    if (!(flags & 1) && command === WIRE_COMMANDS.Memory) {
      const n = payload.length >= 4 ? new DataView(payload.buffer, payload.byteOffset).getUint32(0, true) : 0;
      checked = payload.subarray(0, 8 + 16 * n);
    } else if (!(flags & 1) && command === WIRE_COMMANDS.Disk) {
      // protocol 5 encrypted, 6 also plaintext: the extent only (AES-GCM or the DiskDigest covers the data)
      checked = payload.subarray(0, 24);
    }
    out.push({ command: name, flags, length, crcOk: crc32c(checked, crc32c(header)) === crc, payload });
    at += 16 + length;
  }
  return out;
}
