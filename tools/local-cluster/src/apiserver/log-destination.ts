/**
 * A log destination that can fail without harm: lines go to a file descriptor (stdout) through non-blocking
 * writes; when the descriptor cannot take them (ENOSPC on a full disk, EPIPE, EIO...) they are dropped and counted,
 * never retried forever and never buffered without bound, and the failure is reported once through `onError`.
 * Writes resume by themselves when the descriptor takes bytes again.
 *
 * Why not pino.destination (sonic-boom): on an error other than EAGAIN it emits 'error' (fatal without a listener),
 * keeps the failed bytes and keeps appending to them, and its flushSync at exit retries a full disk forever, so a
 * process with a full log disk could neither serve nor stop.
 */
import { write, writeSync } from "node:fs";

/** Options of {@link DroppingDestination}. */
export interface DroppingDestinationOptions {
  /** Lines waiting beyond this many bytes are dropped (default 4 MiB). */
  readonly maxBufferedBytes?: number;
  /** Told of the first failure after a success (not of every dropped line). */
  readonly onError?: (err: Error) => void;
}

/** A pino destination stream over a file descriptor that drops lines it cannot write. */
export class DroppingDestination {
  readonly #fd: number;
  readonly #max: number;
  readonly #onError: (err: Error) => void;
  #queue: Buffer[] = [];
  #queuedBytes = 0;
  #writing = false;
  #failing = false;
  /** Lines (or chunks of lines) dropped so far. */
  dropped = 0;

  constructor(fd: number, options: DroppingDestinationOptions = {}) {
    this.#fd = fd;
    this.#max = options.maxBufferedBytes ?? 4 * 1024 * 1024;
    this.#onError = options.onError ?? (() => undefined);
  }

  /** Queues one line (pino calls this). */
  write(line: string): boolean {
    const b = Buffer.from(line, "utf8");
    if (this.#queuedBytes + b.length > this.#max) {
      this.dropped++;
      return false;
    }
    this.#queue.push(b);
    this.#queuedBytes += b.length;
    this.#pump();
    return true;
  }

  #pump(): void {
    if (this.#writing || this.#queue.length === 0) return;
    const chunk = this.#queue.length === 1 ? this.#queue[0] : Buffer.concat(this.#queue);
    this.#queue = [];
    this.#queuedBytes = 0;
    this.#writing = true;
    write(this.#fd, chunk, (err, written) => {
      this.#writing = false;
      if (err) this.#failed(err);
      else {
        this.#failing = false;
        if (written < chunk.length) this.#requeue(chunk.subarray(written));
      }
      this.#pump();
    });
  }

  #requeue(rest: Buffer): void {
    this.#queue.unshift(rest);
    this.#queuedBytes += rest.length;
  }

  #failed(err: Error): void {
    this.dropped++;
    if (this.#failing) return;
    this.#failing = true;
    try {
      this.#onError(err);
    } catch {
      // The reporter failed too: the line is dropped either way.
    }
  }

  /** Writes what is queued now, synchronously, once; drops it if the descriptor refuses (before process.exit). */
  flushSync(): void {
    if (this.#queue.length === 0) return;
    const chunk = Buffer.concat(this.#queue);
    this.#queue = [];
    this.#queuedBytes = 0;
    try {
      writeSync(this.#fd, chunk);
    } catch (err) {
      this.#failed(err as Error);
    }
  }
}
