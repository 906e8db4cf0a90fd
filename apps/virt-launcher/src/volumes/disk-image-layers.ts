/**
 * Readers of one image file of a backing chain: raw, or qcow2 (QEMU's docs/interop/qcow2.txt) over an optional
 * backing layer. A read fills a zeroed buffer with guest bytes and says whether it put anything there, so holes
 * (unallocated, zero-flagged, or beyond a short backing file) cost no I/O and stay holes in the copy.
 *
 *   guest offset -> l1 index = offset / (cluster_size * cluster_size/8),  l2 index = offset / cluster_size mod l2_entries
 *   L1 entry  (u64): bits 9..55 = L2 table offset (0: the whole L2 span is unallocated)
 *   L2 entry  (u64): bit 62 = compressed, else bits 9..55 = data cluster offset, bit 0 = reads as zeros (v3)
 *     compressed (x = 62 - (cluster_bits - 8)): bits 0..x-1 = byte offset, bits x..61 = extra 512-byte sectors
 *     unallocated (offset 0, no zero bit): read from the backing layer, zeros past its end
 *
 * Memory is bounded per layer: one page of the L1 table, one L2 table, and a window's compressed input and output
 * (qcow2-compressed.ts), each at most a few MiB.
 */
import type { FileHandle } from "node:fs/promises";
import { DiskImageError } from "./disk-image-error.ts";
import { CompressedClusters, type CompressedPiece } from "./qcow2-compressed.ts";
import type { Qcow2Header } from "./qcow2-header.ts";

/** One file of a chain, read as a guest would see it. */
export interface ImageLayer {
  readonly path: string;
  readonly format: "raw" | "qcow2";
  /** Guest-visible bytes (for a raw backing file, its length as it is). */
  readonly virtualSize: number;
  /**
   * Puts the guest bytes of [offset, offset + length) at `buf[at..]`, which the caller has zeroed; returns whether
   * it wrote anything (false: the whole range reads as zeros). Throws DiskImageError.
   */
  read(offset: number, length: number, buf: Buffer, at: number): Promise<boolean>;
}

/** Reads up to `length` bytes at `position`, looping over short reads; returns how many it got (fewer at EOF). */
export async function readAt(fh: FileHandle, buf: Buffer, at: number, length: number, position: number) {
  let done = 0;
  while (done < length) {
    const { bytesRead } = await fh.read(buf, at + done, length - done, position + done);
    if (bytesRead === 0) break;
    done += bytesRead;
  }
  return done;
}

/** A raw file: guest byte n is file byte n; past the end of the file reads zeros. */
export class RawLayer implements ImageLayer {
  readonly format = "raw";
  readonly path: string;
  readonly virtualSize: number;
  readonly #fh: FileHandle;
  constructor(path: string, fh: FileHandle, size: number) {
    this.path = path;
    this.#fh = fh;
    this.virtualSize = size;
  }

  async read(offset: number, length: number, buf: Buffer, at: number): Promise<boolean> {
    const n = Math.min(length, this.virtualSize - offset);
    if (n <= 0) return false;
    return (await readAt(this.#fh, buf, at, n, offset)) > 0;
  }
}

const L1_PAGE_ENTRIES = 4096;
const MAX_PARTS_PER_READ = 512; // under IOV_MAX (1024), so one preadv reads a whole run
const TWO_POW_32 = 2 ** 32;
const TWO_POW_21 = 2 ** 21; // hi word of an offset at or above 2^53: past any file we can hold

/** What an L2 entry says about one guest cluster. */
type Mapping =
  | { kind: "unallocated" }
  | { kind: "zero" }
  | { kind: "data"; host: number }
  | { kind: "compressed"; host: number; bytes: number };

/** A contiguous host range, scattered into one or more pieces of the caller's buffer: one preadv. */
interface Run {
  host: number;
  length: number;
  parts: Buffer[];
}

/** A qcow2 file (v2 or v3), over `backing` when it has one. */
export class Qcow2Layer implements ImageLayer {
  readonly format = "qcow2";
  readonly path: string;
  readonly virtualSize: number;
  readonly #fh: FileHandle;
  readonly #fileSize: number;
  readonly #header: Qcow2Header;
  readonly #backing: ImageLayer | undefined;
  readonly #cs: number;
  readonly #l2Entries: number;
  #l1Page: { first: number; table: Buffer } = { first: -1, table: Buffer.alloc(0) };
  #l2: { offset: number; table: Buffer } = { offset: -1, table: Buffer.alloc(0) };
  readonly #compressed: CompressedClusters;

  constructor(path: string, fh: FileHandle, fileSize: number, header: Qcow2Header, backing: ImageLayer | undefined) {
    this.path = path;
    this.#fh = fh;
    this.#fileSize = fileSize;
    this.#header = header;
    this.#backing = backing;
    this.virtualSize = header.virtualSize;
    this.#cs = header.clusterSize;
    this.#l2Entries = header.clusterSize / 8;
    this.#compressed = new CompressedClusters(path, fh, fileSize, header.clusterSize);
  }

  async read(offset: number, length: number, buf: Buffer, at: number): Promise<boolean> {
    const end = Math.min(offset + length, this.virtualSize);
    const span = this.#cs * this.#l2Entries;
    const runs: Run[] = [];
    const compressed: CompressedPiece[] = [];
    let wrote = false;
    for (let pos = offset; pos < end; ) {
      const l2Offset = await this.#l1Entry(Math.floor(pos / span));
      if (l2Offset === 0) {
        const spanEnd = Math.min(end, (Math.floor(pos / span) + 1) * span);
        wrote = (await this.#fromBacking(pos, spanEnd - pos, buf, at + pos - offset)) || wrote;
        pos = spanEnd;
        continue;
      }
      const n = Math.min(this.#cs - (pos % this.#cs), end - pos);
      const m = this.#mapping(await this.#l2Table(l2Offset), Math.floor(pos / this.#cs) % this.#l2Entries);
      const dest = at + pos - offset;
      if (m.kind === "data") {
        this.#extend(runs, m.host + (pos % this.#cs), buf.subarray(dest, dest + n));
        wrote = true;
      } else if (m.kind === "compressed") {
        compressed.push({ host: m.host, bytes: m.bytes, from: pos % this.#cs, length: n, dest });
        wrote = true;
      } else if (m.kind === "unallocated") {
        wrote = (await this.#fromBacking(pos, n, buf, dest)) || wrote;
      }
      pos += n;
    }
    // Runs and compressed clusters land in disjoint parts of buf: read them in parallel on the thread pool.
    await Promise.all([...runs.map((run) => this.#readRun(run)), this.#compressed.inflateInto(compressed, buf)]);
    return wrote;
  }

  /** Adds a data cluster piece to the last run when it follows it in the file, else starts a new run. */
  #extend(runs: Run[], host: number, part: Buffer): void {
    if (host + part.length > this.#fileSize)
      this.#fail("TRUNCATED", `data cluster at ${host - (host % this.#cs)} lies past the end of the file`);
    const run = runs.at(-1);
    if (run && run.host + run.length === host && run.parts.length < MAX_PARTS_PER_READ) {
      const last = run.parts[run.parts.length - 1];
      // Pieces adjacent in the buffer too (guest-contiguous clusters) become one piece.
      if (last.buffer === part.buffer && last.byteOffset + last.length === part.byteOffset)
        run.parts[run.parts.length - 1] = Buffer.from(last.buffer, last.byteOffset, last.length + part.length);
      else run.parts.push(part);
      run.length += part.length;
    } else runs.push({ host, length: part.length, parts: [part] });
  }

  async #readRun(run: Run): Promise<void> {
    let got = (await this.#fh.readv(run.parts, run.host)).bytesRead;
    if (got !== run.length) {
      // A short vectored read (rare): finish piece by piece, so a file that really ends here is told apart.
      got = 0;
      for (const part of run.parts) got += await readAt(this.#fh, part, 0, part.length, run.host + got);
    }
    if (got !== run.length) this.#fail("TRUNCATED", `file ends inside the data at ${run.host}`);
  }

  async #fromBacking(pos: number, n: number, buf: Buffer, at: number): Promise<boolean> {
    if (!this.#backing || pos >= this.#backing.virtualSize) return false;
    return this.#backing.read(pos, Math.min(n, this.#backing.virtualSize - pos), buf, at);
  }

  /** The L2 table offset of L1 entry `index` (0: unallocated), checked for alignment and the file's end. */
  async #l1Entry(index: number): Promise<number> {
    const first = index - (index % L1_PAGE_ENTRIES);
    if (this.#l1Page.first !== first) {
      const entries = Math.min(L1_PAGE_ENTRIES, this.#header.l1Entries - first);
      const table = Buffer.alloc(entries * 8);
      const got = await readAt(this.#fh, table, 0, table.length, this.#header.l1Offset + first * 8);
      if (got !== table.length) this.#fail("PAST_EOF", `L1 table at ${this.#header.l1Offset} is cut short`);
      this.#l1Page = { first, table };
    }
    const at = (index - first) * 8;
    const l2 = this.#offset(this.#l1Page.table.readUInt32BE(at), this.#l1Page.table.readUInt32BE(at + 4));
    if (l2 === 0) return 0;
    if (l2 % this.#cs !== 0) this.#fail("BAD_TABLE_ENTRY", `L1 entry ${index} points to unaligned L2 table ${l2}`);
    if (l2 + this.#cs > this.#fileSize)
      this.#fail("PAST_EOF", `L1 entry ${index} points to an L2 table at ${l2}, past the end of the file`);
    return l2;
  }

  async #l2Table(offset: number): Promise<Buffer> {
    if (this.#l2.offset !== offset) {
      const table = this.#l2.table.length === this.#cs ? this.#l2.table : Buffer.alloc(this.#cs);
      this.#l2 = { offset: -1, table };
      if ((await readAt(this.#fh, table, 0, this.#cs, offset)) !== this.#cs)
        this.#fail("PAST_EOF", `L2 table at ${offset} is cut short`);
      this.#l2 = { offset, table };
    }
    return this.#l2.table;
  }

  /** Bits 9..55 of an entry as a number (Infinity when at or above 2^53). */
  #offset(hi: number, lo: number): number {
    const high = hi & 0x00ffffff;
    if (high >= TWO_POW_21) return Number.POSITIVE_INFINITY;
    return high * TWO_POW_32 + ((lo & 0xfffffe00) >>> 0);
  }

  #mapping(table: Buffer, index: number): Mapping {
    const hi = table.readUInt32BE(index * 8);
    const lo = table.readUInt32BE(index * 8 + 4);
    if (hi & 0x40000000) return this.#compressedMapping(hi, lo);
    if (this.#header.version === 3 && lo & 1) return { kind: "zero" };
    const host = this.#offset(hi, lo);
    if (host === 0) return { kind: "unallocated" };
    if (host % this.#cs !== 0) this.#fail("BAD_TABLE_ENTRY", `L2 entry points to unaligned cluster ${host}`);
    return { kind: "data", host };
  }

  #compressedMapping(hi: number, lo: number): Mapping {
    const entry = (BigInt(hi) << 32n) | BigInt(lo >>> 0);
    const x = BigInt(62 - (this.#header.clusterBits - 8));
    const host = Number(entry & ((1n << x) - 1n));
    const sectors = Number((entry >> x) & ((1n << BigInt(this.#header.clusterBits - 8)) - 1n));
    return { kind: "compressed", host, bytes: (sectors + 1) * 512 - (host % 512) };
  }

  #fail(code: DiskImageError["code"], message: string): never {
    throw new DiskImageError(code, this.path, message);
  }
}
