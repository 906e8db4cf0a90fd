/**
 * The qcow2 header, parsed and checked (pure; QEMU's docs/interop/qcow2.txt). All numbers are big-endian.
 *
 *   first cluster of the file
 *   +-----------------------------------------------------------------------------------------------+
 *   | 0 magic "QFI\xfb" | 4 version 2|3 | 8 backing_file_offset u64 | 16 backing_file_size u32         |
 *   | 20 cluster_bits   | 24 size (virtual bytes) u64 | 32 crypt_method | 36 l1_size (entries)          |
 *   | 40 l1_table_offset u64 | 48 refcount_table_offset | 56 refcount_table_clusters | 60 nb_snapshots |
 *   | 64 snapshots_offset  --- v2 ends at 72 ---                                                      |
 *   | 72 incompatible_features | 80 compatible | 88 autoclear | 96 refcount_order | 100 header_length |
 *   | 104 compression_type (v3, when header_length > 104)                                              |
 *   +-----------------------------------------------------------------------------------------------+
 *   | header extensions at header_length: {u32 type, u32 length, data, pad to 8}... type 0 ends       |
 *   |   0xe2792aca backing format ("raw" | "qcow2")                                                  |
 *   | backing file name (not NUL terminated) at backing_file_offset, inside the first cluster        |
 *   +-----------------------------------------------------------------------------------------------+
 *
 * Refcounts, snapshots and bitmaps are not needed to read the active image and are not looked at.
 */
import { DiskImageError } from "./disk-image-error.ts";

/** "QFI\xfb". */
export const QCOW2_MAGIC = 0x514649fb;
/** Bytes to read before the cluster size is known (the v3 header with compression_type). */
export const QCOW2_MIN_HEADER_READ = 112;
/** QEMU's own ceiling for an L1 table (32 MiB), also ours: it bounds what a header can make us read. */
export const MAX_L1_BYTES = 32 * 1024 * 1024;
const MIN_CLUSTER_BITS = 9;
const MAX_CLUSTER_BITS = 21; // QEMU's implementation limit: 2 MiB clusters
const MAX_BACKING_NAME_BYTES = 1023;
const EXT_BACKING_FORMAT = 0xe2792aca;
const INCOMPAT_DIRTY = 1n;
const INCOMPAT_KNOWN_NAMES: readonly string[] = [
  "dirty",
  "corrupt (run qemu-img check -r all)",
  "external data file",
  "non-zlib compression type",
  "extended L2 entries (subclusters)",
];

/** What the reader needs from a qcow2 header, already checked against the file size and the limits. */
export interface Qcow2Header {
  readonly version: 2 | 3;
  readonly clusterBits: number;
  readonly clusterSize: number;
  /** Guest-visible size in bytes (a multiple of 512). */
  readonly virtualSize: number;
  /** Entries in the active L1 table, and where it starts (cluster aligned, inside the file). */
  readonly l1Entries: number;
  readonly l1Offset: number;
  /** The backing file name as written in the image (relative or not: the chain resolver judges it). */
  readonly backingName?: string;
  /** The backing format extension's value, when present ("raw", "qcow2", or anything else to refuse). */
  readonly backingFormat?: string;
}

/** Limits a header is checked against. */
export interface HeaderLimits {
  /** Largest accepted virtual size in bytes. */
  readonly maxVirtualBytes: number;
}

function fail(code: DiskImageError["code"], path: string, message: string): never {
  throw new DiskImageError(code, path, message);
}

/** Whether `buf` starts with the qcow2 magic. */
export function hasQcow2Magic(buf: Buffer): boolean {
  return buf.length >= 4 && buf.readUInt32BE(0) === QCOW2_MAGIC;
}

/** Reads a u64 as a number; anything at or above 2^53 is returned as Infinity (it is past any file's end). */
function u64(buf: Buffer, at: number): number {
  const v = buf.readBigUInt64BE(at);
  return v > BigInt(Number.MAX_SAFE_INTEGER) ? Number.POSITIVE_INFINITY : Number(v);
}

/**
 * The cluster bits of a qcow2 file from its first {@link QCOW2_MIN_HEADER_READ} bytes (or fewer, for a short file),
 * after the magic, version and cluster size checks, so the caller knows how much of the first cluster to read.
 * Throws DiskImageError (BAD_MAGIC, UNSUPPORTED_VERSION, TRUNCATED, BAD_HEADER).
 */
export function qcow2ClusterBits(start: Buffer, fileSize: number, path: string): number {
  if (start.length < 4 || !hasQcow2Magic(start)) fail("BAD_MAGIC", path, "not a qcow2 image (no QFI\\xfb magic)");
  if (start.length < 72) fail("TRUNCATED", path, `file ends at byte ${fileSize}, inside the qcow2 header`);
  const version = start.readUInt32BE(4);
  if (version !== 2 && version !== 3)
    fail("UNSUPPORTED_VERSION", path, `qcow2 version ${version} is not supported (only 2 and 3)`);
  if (version === 3 && start.length < 104)
    fail("TRUNCATED", path, `file ends at byte ${fileSize}, inside the qcow2 v3 header`);
  const bits = start.readUInt32BE(20);
  if (bits < MIN_CLUSTER_BITS || bits > MAX_CLUSTER_BITS)
    fail("BAD_HEADER", path, `cluster_bits ${bits} is out of range (${MIN_CLUSTER_BITS}..${MAX_CLUSTER_BITS})`);
  return bits;
}

function checkFeatures(h: Buffer, version: number, headerLength: number, path: string): void {
  const crypt = h.readUInt32BE(32);
  if (crypt !== 0) fail("UNSUPPORTED_FEATURE", path, `encrypted image (crypt_method ${crypt}) is not supported`);
  if (version === 2) return;
  const incompatible = h.readBigUInt64BE(72) & ~INCOMPAT_DIRTY; // dirty only concerns refcounts, not reading
  if (incompatible === 0n) return;
  const names: string[] = [];
  for (let bit = 1; bit < 64; bit++) {
    if ((incompatible >> BigInt(bit)) & 1n) names.push(INCOMPAT_KNOWN_NAMES[bit] ?? `unknown bit ${bit}`);
  }
  const compression = headerLength > 104 ? h[104] : 0;
  const zstd = compression === 1 ? " (zstd)" : "";
  fail("UNSUPPORTED_FEATURE", path, `incompatible features not supported: ${names.join(", ")}${zstd}`);
}

function checkLayout(h: Buffer, hdr: Omit<Qcow2Header, "backingName" | "backingFormat">, size: number, path: string) {
  const l1Bytes = hdr.l1Entries * 8;
  if (l1Bytes > MAX_L1_BYTES) fail("TOO_LARGE", path, `L1 table of ${l1Bytes} bytes is over ${MAX_L1_BYTES}`);
  const bytesPerL2 = hdr.clusterSize * (hdr.clusterSize / 8);
  const needed = Math.ceil(hdr.virtualSize / bytesPerL2);
  if (hdr.l1Entries < needed)
    fail("BAD_HEADER", path, `L1 table has ${hdr.l1Entries} entries, the virtual size needs ${needed}`);
  if (hdr.l1Offset % hdr.clusterSize !== 0)
    fail("BAD_HEADER", path, `L1 table offset ${hdr.l1Offset} is not cluster aligned`);
  if (hdr.l1Entries > 0 && hdr.l1Offset === 0) fail("BAD_HEADER", path, "L1 table overlaps the header");
  if (hdr.l1Offset + l1Bytes > size)
    fail("PAST_EOF", path, `L1 table at ${hdr.l1Offset} (+${l1Bytes}) lies past the end of the file (${size})`);
  const refcountOrder = hdr.version === 3 ? h.readUInt32BE(96) : 4;
  if (refcountOrder > 6) fail("BAD_HEADER", path, `refcount_order ${refcountOrder} is over 6`);
}

function readBackingName(h: Buffer, size: number, path: string): string | undefined {
  const offset = u64(h, 8);
  if (offset === 0) return undefined;
  const length = h.readUInt32BE(16);
  if (length === 0 || length > MAX_BACKING_NAME_BYTES)
    fail("BAD_HEADER", path, `backing file name length ${length} is out of range (1..${MAX_BACKING_NAME_BYTES})`);
  if (offset + length > size) fail("TRUNCATED", path, "file ends inside the backing file name");
  if (offset + length > h.length) fail("BAD_HEADER", path, "backing file name lies outside the first cluster");
  const name = h.toString("utf8", offset, offset + length);
  if (name.includes("\0")) fail("BAD_HEADER", path, "backing file name contains a NUL byte");
  return name;
}

/** Walks the header extensions; returns the backing format, if one is given. */
function readExtensions(h: Buffer, headerLength: number, path: string): string | undefined {
  const backingOffset = u64(h, 8);
  const end = backingOffset > headerLength ? Math.min(backingOffset, h.length) : h.length;
  let at = headerLength;
  let backingFormat: string | undefined;
  while (at + 8 <= end) {
    const type = h.readUInt32BE(at);
    const length = h.readUInt32BE(at + 4);
    if (type === 0) break;
    if (at + 8 + length > end) fail("BAD_HEADER", path, `header extension 0x${type.toString(16)} overruns`);
    if (type === EXT_BACKING_FORMAT) backingFormat = h.toString("latin1", at + 8, at + 8 + length);
    at += 8 + Math.ceil(length / 8) * 8;
  }
  return backingFormat;
}

/**
 * Parses and checks the header in `firstCluster` (the file's first min(cluster size, file size) bytes) of a qcow2
 * file of `fileSize` bytes. Throws DiskImageError naming the field that is wrong.
 */
export function parseQcow2Header(firstCluster: Buffer, fileSize: number, path: string, limits: HeaderLimits) {
  const h = firstCluster;
  const clusterBits = qcow2ClusterBits(h, fileSize, path);
  const version = h.readUInt32BE(4) as 2 | 3;
  const headerLength = version === 2 ? 72 : h.readUInt32BE(100);
  if (version === 3 && (headerLength < 104 || headerLength % 8 !== 0 || headerLength > 1 << clusterBits))
    fail("BAD_HEADER", path, `header_length ${headerLength} is invalid (a multiple of 8, 104..cluster size)`);
  if (headerLength > h.length) fail("TRUNCATED", path, `file ends at byte ${fileSize}, inside the qcow2 header`);
  checkFeatures(h, version, headerLength, path);
  const virtualSize = u64(h, 24);
  if (virtualSize > limits.maxVirtualBytes)
    fail("TOO_LARGE", path, `virtual size ${virtualSize} is over the limit of ${limits.maxVirtualBytes} bytes`);
  if (virtualSize % 512 !== 0) fail("BAD_SIZE", path, `virtual size ${virtualSize} is not a multiple of 512`);
  const core = {
    version,
    clusterBits,
    clusterSize: 2 ** clusterBits,
    virtualSize,
    l1Entries: h.readUInt32BE(36),
    l1Offset: u64(h, 40),
  };
  checkLayout(h, core, fileSize, path);
  const backingName = readBackingName(h, fileSize, path);
  const backingFormat = readExtensions(h, headerLength, path);
  const header: Qcow2Header = {
    ...core,
    ...(backingName === undefined ? {} : { backingName }),
    ...(backingFormat === undefined ? {} : { backingFormat }),
  };
  return header;
}
