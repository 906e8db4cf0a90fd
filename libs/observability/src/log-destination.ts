/**
 * Log output that can fail without harm. Every process logs to stdout, which is often a file on a disk that may
 * fill up, or a pipe whose reader may go away; a logger that cannot write must never take its process down.
 *
 *   logger.info() --> DroppingDestination.write(line) --queue (<= maxBufferedBytes)--> fs.write(fd) async
 *        EAGAIN: keep the bytes, retry in 10 ms       ENOSPC/EPIPE/EIO/...: drop them, count, report once
 *        a later success clears the failure: writes resume by themselves when the descriptor takes bytes again
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
  /** The write function (tests inject failures); default fs.write. */
  readonly write?: typeof write;
}

/** A pino destination stream over a file descriptor that drops lines it cannot write. */
export class DroppingDestination {
  readonly #fd: number;
  readonly #max: number;
  readonly #onError: (err: Error) => void;
  readonly #write: typeof write;
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
    this.#write = options.write ?? write;
  }

  /** Queues one line (pino calls this); false when it was dropped. */
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
    try {
      this.#write(this.#fd, chunk, (err, written) => this.#done(chunk, err, written));
    } catch (err) {
      // A closed or invalid descriptor throws synchronously (EBADF): the same as a failed write.
      this.#done(chunk, err as NodeJS.ErrnoException, 0);
    }
  }

  #done(chunk: Buffer, err: NodeJS.ErrnoException | null, written: number): void {
    this.#writing = false;
    if (err?.code === "EAGAIN") {
      // A non-blocking pipe that is full for now: keep the bytes (the queue stays bounded) and try again shortly.
      this.#requeue(chunk);
      this.#writing = true;
      setTimeout(() => {
        this.#writing = false;
        this.#pump();
      }, 10).unref();
      return;
    }
    if (err) this.#failed(err);
    else {
      this.#failing = false;
      if (written < chunk.length) this.#requeue(chunk.subarray(written));
    }
    this.#pump();
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

let guarded = false;

/**
 * Makes process.stdout and process.stderr failures harmless: an 'error' event (EPIPE from a closed reader, ENOSPC on
 * a full disk) has a listener, so it is dropped instead of being thrown as an uncaught exception, and a write that
 * throws at once (Deno writes stdio synchronously and throws ENOSPC from write()) drops its line. Idempotent.
 */
export function guardStdio(): void {
  if (guarded) return;
  guarded = true;
  for (const stream of [process.stdout, process.stderr]) {
    stream.on("error", () => {
      // Nothing to do with a line that cannot be written: the process keeps serving.
    });
    const write = stream.write.bind(stream) as (...args: unknown[]) => boolean;
    stream.write = (...args: unknown[]): boolean => {
      try {
        return write(...args);
      } catch {
        return false;
      }
    };
  }
  // Deno's console prints straight to the descriptors and throws when they refuse (Node's goes through the guarded
  // streams above): a console line that cannot be written is dropped too.
  for (const method of ["log", "info", "warn", "error", "debug", "trace"] as const) {
    const print = console[method].bind(console) as (...args: unknown[]) => void;
    console[method] = (...args: unknown[]): void => {
      try {
        print(...args);
      } catch {
        // dropped, as above
      }
    };
  }
}

let stdoutDestination: DroppingDestination | undefined;

/**
 * The process's one log destination on stdout (fd 1), created on first use: failures are reported once on stderr,
 * and what is queued is flushed (or dropped) when the process exits.
 */
export function stdoutLogDestination(): DroppingDestination {
  if (stdoutDestination) return stdoutDestination;
  guardStdio();
  const destination = new DroppingDestination(1, {
    onError: (err) => {
      try {
        writeSync(2, `cannot write log output, dropping lines: ${err.message}\n`);
      } catch {
        // stderr is on the same full disk or closed pipe: the count on the destination is all that is left.
      }
    },
  });
  process.once("exit", () => destination.flushSync());
  stdoutDestination = destination;
  return destination;
}
