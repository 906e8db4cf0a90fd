/**
 * Disk images as KubeVirt accepts them (raw, qcow2 v2/v3, qcow2 over a raw or qcow2 backing chain), turned into the
 * one thing our VMM's virtio-blk reads: a private, sparse raw file. A containerDisk's shared image is only opened
 * read-only; the VMI writes to the copy (docs/decisions/0009-containerdisk-copy.md).
 *
 *   src (raw | qcow2 [-> backing]...)  --importDiskImage-->  dst (raw, sparse, virtual size long)
 *     2 MiB windows, in order:  chain.read(window) -> zeroed buffer (holes cost no I/O)
 *                               -> non-zero 4 KiB blocks written at their offset, zero blocks left as holes
 *
 * Memory is bounded (one 2 MiB window plus, per layer, one L1 page, one L2 table and one inflated cluster), so a
 * multi-GiB image streams. Every refusal is a DiskImageError naming the rule and the file; nothing in an image can
 * crash or hang the launcher (every table entry is checked against the file before it is followed).
 */
import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import { type FileHandle, open, stat, unlink } from "node:fs/promises";
import { dirname } from "node:path";
import { setImmediate as yieldToLoop } from "node:timers/promises";
import { type ChainOptions, checkRawSize, closeAll, detectFormat, openChain, READ_FLAGS } from "./disk-image-chain.ts";
import { DiskImageError } from "./disk-image-error.ts";
import type { ImageLayer } from "./disk-image-layers.ts";
import { parseQcow2Header, QCOW2_MIN_HEADER_READ, qcow2ClusterBits } from "./qcow2-header.ts";

export { DiskImageError, type DiskImageErrorCode } from "./disk-image-error.ts";

/** Default largest virtual size accepted: 1 TiB. */
export const DEFAULT_MAX_VIRTUAL_BYTES = 2 ** 40;
/** Default longest backing chain below the image (QEMU has no limit; real containerDisks have 0 or 1). */
export const DEFAULT_MAX_CHAIN_DEPTH = 8;
const WINDOW_BYTES = 2 * 1024 * 1024; // a multiple of every cluster size (512 B..2 MiB)
const BLOCK_BYTES = 4096; // zero-detection granularity of the copy
const ZERO_BLOCK = Buffer.alloc(BLOCK_BYTES);
const YIELD_EVERY_WINDOWS = 64;

/** What {@link probeDiskImage} finds: the format, the guest-visible size in bytes and the backing name if any. */
export interface DiskImageInfo {
  readonly format: "raw" | "qcow2";
  readonly virtualSize: number;
  /** The backing file name as the image records it (not resolved, not checked). */
  readonly backing?: string;
}

/** Progress of an import: guest bytes scanned so far out of the virtual size. */
export interface ImportProgress {
  readonly doneBytes: number;
  readonly totalBytes: number;
}

/** Options of {@link importDiskImage}; every one has a default. */
export interface ImportOptions {
  /** Backing files below `src` (default {@link DEFAULT_MAX_CHAIN_DEPTH}); deeper chains are refused. */
  readonly maxChainDepth?: number;
  /** Directory every backing file must resolve inside, after symlinks (default: the directory of `src`). */
  readonly allowedDir?: string;
  /** Largest virtual size accepted, in bytes (default {@link DEFAULT_MAX_VIRTUAL_BYTES}). */
  readonly maxVirtualBytes?: number;
  /** The format `src` is declared to be (e.g. by the image's metadata); absent: detected from its magic. */
  readonly format?: "raw" | "qcow2";
  /** Called at most every {@link progressIntervalBytes} guest bytes and once at the end. */
  readonly onProgress?: (progress: ImportProgress) => void;
  /** Guest bytes between progress calls (default 256 MiB). */
  readonly progressIntervalBytes?: number;
  /** Aborts the import (the partial `dst` is removed; the error has code ABORTED). */
  readonly signal?: AbortSignal;
}

/** What an import did. */
export interface ImportResult {
  readonly format: "raw" | "qcow2";
  readonly virtualSize: number;
  /** Bytes of data written to `dst` (the rest of it is holes). */
  readonly allocatedBytes: number;
  /** Wall time of the import in milliseconds. */
  readonly ms: number;
}

/**
 * Reads the format, virtual size and backing name of the image at `path` (synchronous: reads at most its first
 * cluster). A file without the qcow2 magic is raw. Throws DiskImageError when the image would be refused by
 * {@link importDiskImage}'s header checks (backing files are not opened here).
 */
export function probeDiskImage(path: string, options: { maxVirtualBytes?: number } = {}): DiskImageInfo {
  const maxVirtualBytes = options.maxVirtualBytes ?? DEFAULT_MAX_VIRTUAL_BYTES;
  let fd: number;
  try {
    fd = openSync(path, READ_FLAGS);
  } catch (err) {
    throw new DiskImageError("IO_ERROR", path, "cannot open the image", { cause: err });
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new DiskImageError("NOT_A_FILE", path, "is not a regular file");
    const size = st.size;
    const start = Buffer.alloc(Math.min(QCOW2_MIN_HEADER_READ, size));
    readSync(fd, start, 0, start.length, 0);
    if (detectFormat(start, path) === "raw") {
      checkRawSize(size, path, maxVirtualBytes);
      return { format: "raw", virtualSize: size };
    }
    const first = Buffer.alloc(Math.min(2 ** qcow2ClusterBits(start, size, path), size));
    readSync(fd, first, 0, first.length, 0);
    const header = parseQcow2Header(first, size, path, { maxVirtualBytes });
    const backing = header.backingName === undefined ? {} : { backing: header.backingName };
    return { format: "qcow2", virtualSize: header.virtualSize, ...backing };
  } finally {
    closeSync(fd);
  }
}

/**
 * Opens `src` and its whole backing chain as {@link importDiskImage} would and closes them: every header, the chain's
 * depth and loops, and every backing file inside `allowedDir` (default: the directory of `src`). For a layer another
 * reader opens (QEMU's overlay backing): what an import would refuse up front is refused here. Throws DiskImageError.
 */
export async function checkDiskImage(
  src: string,
  options: Pick<ImportOptions, "allowedDir" | "maxChainDepth" | "maxVirtualBytes" | "format"> = {},
): Promise<DiskImageInfo> {
  const chain = await openChain(src, options.format, {
    maxChainDepth: options.maxChainDepth ?? DEFAULT_MAX_CHAIN_DEPTH,
    allowedDir: options.allowedDir ?? dirname(src),
    maxVirtualBytes: options.maxVirtualBytes ?? DEFAULT_MAX_VIRTUAL_BYTES,
  });
  await closeAll(chain.handles);
  return { format: chain.top.format, virtualSize: chain.top.virtualSize };
}

async function writeRun(out: FileHandle, buf: Buffer, from: number, to: number, position: number): Promise<number> {
  const { bytesWritten } = await out.write(buf, from, to - from, position + from);
  if (bytesWritten !== to - from) throw new Error(`short write at ${position + from}`);
  return bytesWritten;
}

/** Writes the non-zero 4 KiB blocks of `buf[0..length)` at `position`, runs in parallel; returns the bytes written. */
async function writeNonZero(out: FileHandle, buf: Buffer, length: number, position: number): Promise<number> {
  const writes: Promise<number>[] = [];
  let runStart = -1;
  for (let at = 0; at < length; at += BLOCK_BYTES) {
    const end = Math.min(at + BLOCK_BYTES, length);
    if (buf.compare(ZERO_BLOCK, 0, end - at, at, end) !== 0) {
      if (runStart < 0) runStart = at;
    } else if (runStart >= 0) {
      writes.push(writeRun(out, buf, runStart, at, position));
      runStart = -1;
    }
  }
  if (runStart >= 0) writes.push(writeRun(out, buf, runStart, length, position));
  return (await Promise.all(writes)).reduce((a, b) => a + b, 0);
}

/** One of the two window buffers: while one is written out, the next window is read into the other. */
interface WindowBuffer {
  readonly buf: Buffer;
  dirty: boolean;
}

/**
 * Copies every window of `top` into `out`; returns the bytes written. Reading window i overlaps writing window i-1
 * (two buffers), so a read never waits for the destination and the reverse.
 */
async function copyWindows(top: ImageLayer, out: FileHandle, options: ImportOptions): Promise<number> {
  const total = top.virtualSize;
  const interval = options.progressIntervalBytes ?? 256 * 1024 * 1024;
  const buffers: WindowBuffer[] = [0, 1].map(() => ({ buf: Buffer.alloc(WINDOW_BYTES), dirty: false }));
  let writing: Promise<number> = Promise.resolve(0);
  let allocated = 0;
  let nextProgress = interval;
  try {
    for (let off = 0, window = 0; off < total; off += WINDOW_BYTES, window++) {
      if (options.signal?.aborted) throw new DiskImageError("ABORTED", top.path, "import aborted");
      const length = Math.min(WINDOW_BYTES, total - off);
      const w = buffers[window % 2];
      if (w.dirty) w.buf.fill(0);
      w.dirty = await top.read(off, length, w.buf, 0);
      allocated += await writing;
      writing = w.dirty ? writeNonZero(out, w.buf, length, off) : Promise.resolve(0);
      // Awaited on the next window; marked handled now so a failure during the next read is not "unhandled".
      writing.catch(() => undefined);
      if (off + length >= nextProgress) {
        options.onProgress?.({ doneBytes: off + length, totalBytes: total });
        nextProgress += interval;
      }
      // Long runs of holes do no I/O: let the launcher's other work in between.
      if (window % YIELD_EVERY_WINDOWS === YIELD_EVERY_WINDOWS - 1) await yieldToLoop();
    }
    allocated += await writing;
  } finally {
    await writing.catch(() => 0); // never leave a write in flight on a handle the caller closes
  }
  options.onProgress?.({ doneBytes: total, totalBytes: total });
  return allocated;
}

/** Refuses a destination that is one of the chain's files (a write there would change the shared image). */
async function checkDestination(dst: string, files: ReadonlySet<string>): Promise<void> {
  const st = await stat(dst).catch(() => undefined);
  if (st && files.has(`${st.dev}:${st.ino}`))
    throw new DiskImageError("DESTINATION_IN_CHAIN", dst, "the destination is one of the images being read");
}

/**
 * Writes a sparse raw copy of the image at `src` (raw or qcow2, with its backing chain) to `dst`, replacing it.
 * Only data is written: unallocated and zero clusters and all-zero 4 KiB blocks stay holes. `src` and its backing
 * files are opened read-only. On failure `dst` is removed and a DiskImageError says what is wrong with which file
 * (I/O failures: code IO_ERROR with the cause). Bounded memory whatever the image size; see {@link ImportOptions}.
 */
export async function importDiskImage(src: string, dst: string, options: ImportOptions = {}): Promise<ImportResult> {
  const t0 = performance.now();
  const chainOptions: ChainOptions = {
    maxChainDepth: options.maxChainDepth ?? DEFAULT_MAX_CHAIN_DEPTH,
    allowedDir: options.allowedDir ?? dirname(src),
    maxVirtualBytes: options.maxVirtualBytes ?? DEFAULT_MAX_VIRTUAL_BYTES,
  };
  const chain = await openChain(src, options.format, chainOptions);
  let out: FileHandle | undefined;
  try {
    await checkDestination(dst, chain.files);
    // A new inode, not O_TRUNC of the old copy: ext4 flushes a truncated-then-rewritten file on close
    // (auto_da_alloc), which cost 1.5 s for a 100 MB copy in the bench.
    await unlink(dst).catch(() => undefined); // absent is fine; anything else makes the exclusive open fail
    out = await open(dst, "wx");
    await out.truncate(chain.top.virtualSize);
    const allocatedBytes = await copyWindows(chain.top, out, options);
    await out.close();
    out = undefined;
    const ms = Math.round((performance.now() - t0) * 10) / 10;
    return { format: chain.top.format, virtualSize: chain.top.virtualSize, allocatedBytes, ms };
  } catch (err) {
    if (out) {
      await out.close().catch(() => undefined); // already failing: the original error is the one to report
      await unlink(dst).catch(() => undefined);
    }
    if (err instanceof DiskImageError) throw err;
    throw new DiskImageError("IO_ERROR", dst, `import of ${src} failed`, { cause: err });
  } finally {
    await closeAll(chain.handles);
  }
}
