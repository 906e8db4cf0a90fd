/**
 * Byte encoders for ISO 9660 (ECMA-119, 4th edition) structures and the Rock Ridge entries (SUSP 1.12 system use
 * entries, RRIP 1.10 "RRIP_1991A"). Pure: each function returns the bytes of one structure.
 *
 * Directory record (ECMA-119 9.1), all numbers "both-endian" (little-endian copy, then big-endian copy):
 * ```
 *  0 len | 1 ext-attr len | 2..9 extent (block) | 10..17 data length | 18..24 recording date | 25 flags
 * 26 unit size | 27 gap | 28..31 volume sequence no. | 32 id len | 33.. id [pad to even] | system use (SUSP)
 * ```
 * SUSP entry: `sig[2] len ver payload...`. We write SP (first entry of the root's "."), CE (continuation area),
 * ER (the RRIP extension reference, in the root's continuation area), PX (POSIX mode, links, uid, gid) and NM
 * (the real name, split over entries with the CONTINUE flag when longer than one entry holds).
 */

/** Logical block (sector) size: the only one Linux and every reader accept for CD images. */
export const BLOCK_BYTES = 2048;
/** The largest directory record (its length is one byte). */
export const MAX_RECORD_BYTES = 255;
/** Size of a CE entry. */
export const CE_BYTES = 28;
/** Size of a PX entry in RRIP 1.10 (no inode number). */
export const PX_BYTES = 36;

const RRIP_ID = "RRIP_1991A";
const RRIP_DESCRIPTOR = "THE ROCK RIDGE INTERCHANGE PROTOCOL PROVIDES SUPPORT FOR POSIX FILE SYSTEM SEMANTICS";
const RRIP_SOURCE =
  "PLEASE CONTACT DISC PUBLISHER FOR SPECIFICATION SOURCE.  SEE PUBLISHER IDENTIFIER IN PRIMARY VOLUME DESCRIPTOR FOR CONTACT INFORMATION.";

/** Writes `value` as a 32-bit both-endian number (ECMA-119 7.3.3) at `offset`. */
export function putBoth32(buf: Buffer, offset: number, value: number): void {
  buf.writeUInt32LE(value, offset);
  buf.writeUInt32BE(value, offset + 4);
}

/** Writes `value` as a 16-bit both-endian number (ECMA-119 7.2.3) at `offset`. */
export function putBoth16(buf: Buffer, offset: number, value: number): void {
  buf.writeUInt16LE(value, offset);
  buf.writeUInt16BE(value, offset + 2);
}

/** The 7-byte recording date of a directory record (ECMA-119 9.1.5), in UTC (offset 0). */
export function recordingDate(date: Date): Buffer {
  return Buffer.from([
    date.getUTCFullYear() - 1900,
    date.getUTCMonth() + 1,
    date.getUTCDate(),
    date.getUTCHours(),
    date.getUTCMinutes(),
    date.getUTCSeconds(),
    0,
  ]);
}

/** The 17-byte volume descriptor date (ECMA-119 8.4.26.1): digits YYYYMMDDHHMMSScc, then the UTC offset; unset = 0s. */
export function volumeDate(date: Date | undefined): Buffer {
  const out = Buffer.alloc(17);
  if (!date) {
    out.write("0".repeat(16), 0, "ascii");
    return out;
  }
  const p = (n: number, w = 2): string => String(n).padStart(w, "0");
  const text =
    p(date.getUTCFullYear(), 4) +
    p(date.getUTCMonth() + 1) +
    p(date.getUTCDate()) +
    p(date.getUTCHours()) +
    p(date.getUTCMinutes()) +
    p(date.getUTCSeconds()) +
    p(Math.floor(date.getUTCMilliseconds() / 10));
  out.write(text, 0, "ascii");
  return out;
}

/** Bytes a directory record takes with an identifier of `idBytes` and `systemUseBytes` of SUSP entries. */
export function recordBytes(idBytes: number, systemUseBytes: number): number {
  const padded = 33 + idBytes + (idBytes % 2 === 0 ? 1 : 0);
  return padded + systemUseBytes;
}

/** What a directory record says. `identifier` is already encoded (d-characters, UCS-2, or 0x00 / 0x01). */
export interface DirectoryRecordFields {
  readonly extent: number;
  readonly dataLength: number;
  readonly date: Date;
  readonly isDirectory: boolean;
  readonly identifier: Buffer;
  readonly systemUse: Buffer;
}

/** One directory record (ECMA-119 9.1). The caller keeps it at most 255 bytes (see recordBytes). */
export function directoryRecord(f: DirectoryRecordFields): Buffer {
  const length = recordBytes(f.identifier.length, f.systemUse.length);
  const out = Buffer.alloc(length);
  out[0] = length;
  putBoth32(out, 2, f.extent);
  putBoth32(out, 10, f.dataLength);
  recordingDate(f.date).copy(out, 18);
  out[25] = f.isDirectory ? 0x02 : 0x00;
  putBoth16(out, 28, 1);
  out[32] = f.identifier.length;
  f.identifier.copy(out, 33);
  f.systemUse.copy(out, length - f.systemUse.length);
  return out;
}

/** One path table record (ECMA-119 9.4), little-endian (type L) or big-endian (type M). */
export function pathTableRecord(identifier: Buffer, extent: number, parent: number, bigEndian: boolean): Buffer {
  const out = Buffer.alloc(8 + identifier.length + (identifier.length % 2));
  out[0] = identifier.length;
  if (bigEndian) {
    out.writeUInt32BE(extent, 2);
    out.writeUInt16BE(parent, 6);
  } else {
    out.writeUInt32LE(extent, 2);
    out.writeUInt16LE(parent, 6);
  }
  identifier.copy(out, 8);
  return out;
}

function suspHeader(sig: string, length: number): Buffer {
  const out = Buffer.alloc(length);
  out.write(sig, 0, "ascii");
  out[2] = length;
  out[3] = 1;
  return out;
}

/** SUSP "SP": marks SUSP in use; the first entry of the root directory's "." record. */
export function spEntry(): Buffer {
  const out = suspHeader("SP", 7);
  out[4] = 0xbe;
  out[5] = 0xef;
  return out;
}

/** SUSP "CE": the rest of this record's entries are `length` bytes at `offset` in block `block`. */
export function ceEntry(block: number, offset: number, length: number): Buffer {
  const out = suspHeader("CE", CE_BYTES);
  putBoth32(out, 4, block);
  putBoth32(out, 12, offset);
  putBoth32(out, 20, length);
  return out;
}

/** SUSP "ER": names the extension in use (RRIP_1991A, version 1). */
export function erEntry(): Buffer {
  const length = 8 + RRIP_ID.length + RRIP_DESCRIPTOR.length + RRIP_SOURCE.length;
  const out = suspHeader("ER", length);
  out[4] = RRIP_ID.length;
  out[5] = RRIP_DESCRIPTOR.length;
  out[6] = RRIP_SOURCE.length;
  out[7] = 1;
  out.write(RRIP_ID + RRIP_DESCRIPTOR + RRIP_SOURCE, 8, "ascii");
  return out;
}

/** RRIP "PX": POSIX mode (type bits included), link count, uid and gid. */
export function pxEntry(mode: number, links: number, uid: number, gid: number): Buffer {
  const out = suspHeader("PX", PX_BYTES);
  putBoth32(out, 4, mode);
  putBoth32(out, 12, links);
  putBoth32(out, 20, uid);
  putBoth32(out, 28, gid);
  return out;
}

/** Name bytes one NM entry carries (its length byte counts the 5-byte header too). */
const NM_CHUNK_BYTES = MAX_RECORD_BYTES - 5;

/** RRIP "NM" entries for a name: one per 250 bytes, all but the last with the CONTINUE flag. */
export function nmEntries(name: Buffer): Buffer[] {
  const entries: Buffer[] = [];
  for (let at = 0; at < name.length || at === 0; at += NM_CHUNK_BYTES) {
    const chunk = name.subarray(at, at + NM_CHUNK_BYTES);
    const out = suspHeader("NM", 5 + chunk.length);
    out[4] = at + NM_CHUNK_BYTES < name.length ? 0x01 : 0x00;
    chunk.copy(out, 5);
    entries.push(out);
  }
  return entries;
}

/** The RRIP entries whose bytes ER needs: exported for the layout to size the root's continuation area. */
export const ER_BYTES = erEntry().length;

/** A string as ISO "a-characters" or "d-characters" field padded with spaces (ECMA-119 7.4), or as UCS-2 BE. */
export function textField(text: string, bytes: number, ucs2: boolean): Buffer {
  const out = Buffer.alloc(bytes);
  if (!ucs2) {
    out.fill(0x20);
    out.write(text.slice(0, bytes), 0, "latin1");
    return out;
  }
  for (let i = 0; i + 1 < bytes; i += 2) out.writeUInt16BE(0x0020, i);
  encodeUcs2(text.slice(0, Math.floor(bytes / 2))).copy(out, 0);
  return out;
}

/** UTF-16 big-endian bytes of `text` (Joliet's UCS-2 level 3; a pair stays a pair, as Linux reads it). */
export function encodeUcs2(text: string): Buffer {
  const out = Buffer.alloc(text.length * 2);
  for (let i = 0; i < text.length; i++) out.writeUInt16BE(text.charCodeAt(i), i * 2);
  return out;
}

/** What a volume descriptor says. */
export interface DescriptorFields {
  readonly ucs2: boolean;
  readonly volumeId: string;
  readonly totalBlocks: number;
  readonly pathTableBytes: number;
  readonly lPath: number;
  readonly mPath: number;
  /** The root directory of this descriptor's tree: its block and size in bytes. */
  readonly rootBlock: number;
  readonly rootBytes: number;
  readonly timestamp: Date;
}

/** The primary (type 1) or Joliet supplementary (type 2) volume descriptor, ECMA-119 8.4 / 8.5. */
export function volumeDescriptor(f: DescriptorFields): Buffer {
  const out = Buffer.alloc(BLOCK_BYTES);
  out[0] = f.ucs2 ? 2 : 1;
  out.write("CD001", 1, "ascii");
  out[6] = 1;
  textField("", 32, f.ucs2).copy(out, 8); // system identifier
  textField(f.volumeId, 32, f.ucs2).copy(out, 40);
  putBoth32(out, 80, f.totalBlocks);
  if (f.ucs2) out.write("%/E", 88, "ascii"); // UCS-2 level 3
  putBoth16(out, 120, 1); // volume set size
  putBoth16(out, 124, 1); // volume sequence number
  putBoth16(out, 128, BLOCK_BYTES);
  putBoth32(out, 132, f.pathTableBytes);
  out.writeUInt32LE(f.lPath, 140);
  out.writeUInt32BE(f.mPath, 148);
  const rootRecord = directoryRecord({
    extent: f.rootBlock,
    dataLength: f.rootBytes,
    date: f.timestamp,
    isDirectory: true,
    identifier: Buffer.from([0]),
    systemUse: Buffer.alloc(0),
  });
  rootRecord.copy(out, 156);
  // Volume set, publisher, data preparer, application (128 each); copyright, abstract, bibliographic (37 each).
  for (const [at, bytes] of [
    [190, 128],
    [318, 128],
    [446, 128],
    [574, 128],
    [702, 37],
    [739, 37],
    [776, 37],
  ] as const) {
    textField("", bytes, f.ucs2 && bytes === 128).copy(out, at);
  }
  volumeDate(f.timestamp).copy(out, 813); // creation
  volumeDate(f.timestamp).copy(out, 830); // modification
  volumeDate(undefined).copy(out, 847); // expiration
  volumeDate(undefined).copy(out, 864); // effective
  out[881] = 1; // file structure version
  return out;
}

/** The volume descriptor set terminator (ECMA-119 8.3). */
export function terminator(): Buffer {
  const out = Buffer.alloc(BLOCK_BYTES);
  out[0] = 255;
  out.write("CD001", 1, "ascii");
  out[6] = 1;
  return out;
}
