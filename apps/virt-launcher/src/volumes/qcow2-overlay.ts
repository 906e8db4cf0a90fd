/**
 * A fresh qcow2 v3 overlay over a backing image, written in process (what `qemu-img create -f qcow2 -b IMAGE -F FMT`
 * writes; the launcher image carries no qemu-img). The QEMU backend's containerDisk write layer: QEMU allocates
 * clusters in it as the guest writes and reads everything else from the backing image, which it opens read-only.
 *
 *   cluster 0   header (104 bytes, v3, refcount_order 4) | extension: backing format | end | backing file name
 *   cluster 1   refcount table: one entry -> cluster 2
 *   cluster 2   refcount block: clusters 0 .. 2 + L1 clusters have refcount 1
 *   cluster 3.. L1 table: l1_size zero entries (nothing allocated: every read goes to the backing file)
 *
 * 64 KiB clusters (QEMU's default). Checked by `qemu-img check` in the tests.
 */
import { closeSync, openSync, writeSync } from "node:fs";

const QCOW2_MAGIC = 0x514649fb;
const CLUSTER_BITS = 16;
const CLUSTER = 1 << CLUSTER_BITS;
const HEADER_LENGTH = 104;
const EXT_BACKING_FORMAT = 0xe2792aca;

/** Largest backing name QEMU accepts (1023 bytes), and what fits in the header cluster here. */
const MAX_BACKING_NAME = 1023;

/**
 * Writes a new qcow2 overlay at `path` (replacing nothing: the file must not exist) of `virtualBytes` over `backing`
 * (an absolute path) in `backingFormat`. Throws RangeError for a bad size or name, the fs error otherwise.
 */
export function writeQcow2Overlay(
  path: string,
  backing: string,
  backingFormat: "raw" | "qcow2",
  virtualBytes: number,
): void {
  if (!Number.isSafeInteger(virtualBytes) || virtualBytes <= 0 || virtualBytes % 512 !== 0)
    throw new RangeError(`overlay size must be a positive multiple of 512 bytes, got ${virtualBytes}`);
  const name = Buffer.from(backing, "utf8");
  if (name.length === 0 || name.length > MAX_BACKING_NAME || !backing.startsWith("/"))
    throw new RangeError(`backing file must be an absolute path of at most ${MAX_BACKING_NAME} bytes`);
  const l2Entries = CLUSTER / 8;
  const l1Size = Math.ceil(virtualBytes / (CLUSTER * l2Entries));
  const l1Clusters = Math.max(1, Math.ceil((l1Size * 8) / CLUSTER));
  const totalClusters = 3 + l1Clusters;
  if (totalClusters > CLUSTER / 2) throw new RangeError("overlay too large for one refcount block");

  const header = Buffer.alloc(CLUSTER);
  const fmt = Buffer.from(backingFormat, "ascii");
  const extAt = HEADER_LENGTH;
  const extEnd = extAt + 8 + align8(fmt.length) + 8; // the format extension, then the end marker
  const nameAt = extEnd;
  header.writeUInt32BE(QCOW2_MAGIC, 0);
  header.writeUInt32BE(3, 4); // version
  header.writeBigUInt64BE(BigInt(nameAt), 8); // backing_file_offset
  header.writeUInt32BE(name.length, 16); // backing_file_size
  header.writeUInt32BE(CLUSTER_BITS, 20);
  header.writeBigUInt64BE(BigInt(virtualBytes), 24);
  header.writeUInt32BE(0, 32); // crypt_method
  header.writeUInt32BE(l1Size, 36);
  header.writeBigUInt64BE(BigInt(3 * CLUSTER), 40); // l1_table_offset
  header.writeBigUInt64BE(BigInt(CLUSTER), 48); // refcount_table_offset
  header.writeUInt32BE(1, 56); // refcount_table_clusters
  header.writeUInt32BE(0, 60); // nb_snapshots
  header.writeBigUInt64BE(0n, 64); // snapshots_offset
  header.writeBigUInt64BE(0n, 72); // incompatible_features
  header.writeBigUInt64BE(0n, 80); // compatible_features
  header.writeBigUInt64BE(0n, 88); // autoclear_features
  header.writeUInt32BE(4, 96); // refcount_order: 16-bit refcounts
  header.writeUInt32BE(HEADER_LENGTH, 100);
  header.writeUInt32BE(EXT_BACKING_FORMAT, extAt);
  header.writeUInt32BE(fmt.length, extAt + 4);
  fmt.copy(header, extAt + 8);
  // end-of-extensions: type 0, length 0 (already zero)
  name.copy(header, nameAt);

  const refcountTable = Buffer.alloc(CLUSTER);
  refcountTable.writeBigUInt64BE(BigInt(2 * CLUSTER), 0);
  const refcountBlock = Buffer.alloc(CLUSTER);
  for (let c = 0; c < totalClusters; c++) refcountBlock.writeUInt16BE(1, c * 2);

  const fd = openSync(path, "wx");
  try {
    writeAll(fd, header, 0);
    writeAll(fd, refcountTable, CLUSTER);
    writeAll(fd, refcountBlock, 2 * CLUSTER);
    writeAll(fd, Buffer.alloc(l1Clusters * CLUSTER), 3 * CLUSTER);
  } finally {
    closeSync(fd);
  }
}

function align8(n: number): number {
  return (n + 7) & ~7;
}

function writeAll(fd: number, buf: Buffer, position: number): void {
  let done = 0;
  while (done < buf.length) done += writeSync(fd, buf, done, buf.length - done, position + done);
}
