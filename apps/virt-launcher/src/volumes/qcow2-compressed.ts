/**
 * qcow2 compressed clusters: raw deflate (zlib without header) streams packed back to back in the file, each one
 * inflating to exactly one cluster. An L2 entry gives the byte offset of a stream and an upper bound of its length
 * (whole 512-byte sectors, the last one possibly shared with the next stream or cut by the end of the file):
 *
 *   file: ... | stream A ......| stream B ...........|stream C ..| ...     (not cluster or sector aligned)
 *                 ^ host        ^ host + bytes: inflate stops at the stream's end, the rest is ignored
 *
 * The streams of one window are read with one pread when they lie close together, then inflated in parallel on
 * the thread pool (as qemu-img does on its worker threads), each bounded to one cluster of output.
 */
import type { FileHandle } from "node:fs/promises";
import { promisify } from "node:util";
import { inflateRaw, constants as zlibConstants } from "node:zlib";
import { DiskImageError } from "./disk-image-error.ts";

const inflateRawAsync = promisify(inflateRaw);
/** Largest span of the file read at once to serve a window's compressed clusters. */
const MAX_BATCH_READ_BYTES = 4 * 1024 * 1024;

/** One compressed cluster to inflate: the guest bytes [from, from + length) of it go to `dest` in the buffer. */
export interface CompressedPiece {
  readonly host: number;
  readonly bytes: number;
  readonly from: number;
  readonly length: number;
  readonly dest: number;
}

/** Reads and inflates the compressed clusters of one qcow2 file. */
export class CompressedClusters {
  readonly #path: string;
  readonly #fh: FileHandle;
  readonly #fileSize: number;
  readonly #clusterSize: number;
  /** The last cluster inflated: a backing layer is asked for one cluster in pieces when the overlay's are smaller. */
  #last: { host: number; data: Buffer } = { host: -1, data: Buffer.alloc(0) };

  constructor(path: string, fh: FileHandle, fileSize: number, clusterSize: number) {
    this.#path = path;
    this.#fh = fh;
    this.#fileSize = fileSize;
    this.#clusterSize = clusterSize;
  }

  /** Inflates every piece into `buf`. Throws DiskImageError (TRUNCATED, BAD_COMPRESSED_CLUSTER). */
  async inflateInto(pieces: readonly CompressedPiece[], buf: Buffer): Promise<void> {
    if (pieces.length === 0) return;
    for (const p of pieces) {
      if (p.host >= this.#fileSize)
        throw new DiskImageError(
          "TRUNCATED",
          this.#path,
          `compressed cluster at ${p.host} lies past the end of the file`,
        );
    }
    const inputs = await this.#readInputs(pieces);
    await Promise.all(
      pieces.map(async (p, i) => {
        const data = this.#last.host === p.host ? this.#last.data : await this.#inflate(p.host, inputs[i]);
        data.copy(buf, p.dest, p.from, p.from + p.length);
        this.#last = { host: p.host, data };
      }),
    );
  }

  /** The compressed bytes of each piece: one read when they span at most MAX_BATCH_READ_BYTES, else one each. */
  async #readInputs(pieces: readonly CompressedPiece[]): Promise<Buffer[]> {
    const end = (p: CompressedPiece): number => Math.min(p.host + p.bytes, this.#fileSize);
    const lo = Math.min(...pieces.map((p) => p.host));
    const hi = Math.max(...pieces.map(end));
    if (hi - lo <= MAX_BATCH_READ_BYTES) {
      const span = Buffer.alloc(hi - lo);
      await readFully(this.#fh, span, lo);
      return pieces.map((p) => span.subarray(p.host - lo, end(p) - lo));
    }
    return Promise.all(
      pieces.map(async (p) => {
        const input = Buffer.alloc(end(p) - p.host);
        await readFully(this.#fh, input, p.host);
        return input;
      }),
    );
  }

  async #inflate(host: number, input: Buffer): Promise<Buffer> {
    let data: Buffer;
    try {
      // Z_SYNC_FLUSH: a stream cut by the end of the file yields what it has, judged by its length below.
      data = await inflateRawAsync(input, {
        maxOutputLength: this.#clusterSize,
        finishFlush: zlibConstants.Z_SYNC_FLUSH,
      });
    } catch (err) {
      // A corrupt stream, or one that inflates past a cluster: the image's fault, reported as such.
      throw new DiskImageError("BAD_COMPRESSED_CLUSTER", this.#path, `compressed cluster at ${host} is corrupt`, {
        cause: err,
      });
    }
    if (data.length !== this.#clusterSize)
      throw new DiskImageError(
        "BAD_COMPRESSED_CLUSTER",
        this.#path,
        `compressed cluster at ${host} inflates to ${data.length} bytes, not ${this.#clusterSize}`,
      );
    return data;
  }
}

/** Reads buf.length bytes at `position` or up to the end of the file. */
async function readFully(fh: FileHandle, buf: Buffer, position: number): Promise<void> {
  for (let done = 0; done < buf.length; ) {
    const { bytesRead } = await fh.read(buf, done, buf.length - done, position + done);
    if (bytesRead === 0) return;
    done += bytesRead;
  }
}
