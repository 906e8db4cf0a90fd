/**
 * Where committed batches go. On disk, a worker thread owns the SQLite write connection, so the fsync of one batch
 * overlaps with the main thread accepting and validating the next ones (pipelined group commit):
 *
 *   main thread:  batch N ──postMessage──▶ worker: BEGIN; INSERT...; COMMIT (fsync) ──▶ {upTo: N}
 *                 batch N+1 ──postMessage──▶ (queued while N commits)  ┐ drained together:
 *                 batch N+2 ──postMessage──▶ (queued while N commits)  ┘ one transaction ──▶ {upTo: N+2}
 *
 * The main thread never waits for a reply before sending the next batch, and the worker answers in order, so
 * batches become durable, and are acknowledged, in revision order. In memory there is nothing to wait for, so batches
 * are appended synchronously.
 *
 * After a refused batch, the worker refuses every message it already holds (they were built on top of the refused
 * batch) until `resume()`, which the store sends once it has undone them in memory. `probe()` tries a tiny commit:
 * the store uses it to learn that the disk takes writes again.
 */
import { MessageChannel, type MessagePort, Worker } from "node:worker_threads";
import type { LogRow, SqliteLog } from "./sqlite-log.ts";

/** A sink for batches of rows. Calls are applied in call order. */
export interface LogWriter {
  /** Resolves once the batch (and every batch sent before it) is durable. */
  append(rows: LogRow[]): Promise<void>;
  /** Compacts history up to `rev`. */
  compact(rev: number): Promise<void>;
  /** After a refused batch: take batches again (everything sent before this call is refused). */
  resume(): Promise<void>;
  /** Commits a tiny write to the log; resolves if the disk takes writes. */
  probe(): Promise<void>;
  close(): Promise<void>;
}

/** A log failure carrying SQLite's result code (node:sqlite's `errcode`), e.g. 13 SQLITE_FULL. */
function logFailure(message: string, errcode: number | undefined): Error {
  const err = new Error(message) as Error & { errcode?: number };
  if (errcode !== undefined) err.errcode = errcode;
  return err;
}

function settle(action: () => void): Promise<void> {
  try {
    action();
    return Promise.resolve();
  } catch (err) {
    return Promise.reject(err instanceof Error ? err : new Error(String(err)));
  }
}

/** Appends on the calling thread (in-memory logs). */
export class SyncLogWriter implements LogWriter {
  readonly #log: SqliteLog;
  constructor(log: SqliteLog) {
    this.#log = log;
  }
  append(rows: LogRow[]): Promise<void> {
    return settle(() => this.#log.append(rows));
  }
  compact(rev: number): Promise<void> {
    return settle(() => this.#log.compact(rev));
  }
  resume(): Promise<void> {
    return Promise.resolve();
  }
  probe(): Promise<void> {
    return settle(() => this.#log.probe());
  }
  close(): Promise<void> {
    this.#log.close();
    return Promise.resolve();
  }
}

/** The worker's answer: every message with an id up to `upTo` is done (or failed, with `error`). */
interface Reply {
  upTo: number;
  error?: string;
  errcode?: number;
}

/**
 * Appends in a worker thread that owns its own SQLite connection; a second thread checkpoints the WAL
 * (checkpoint-worker.ts) so commits do not wait for checkpoints.
 */
export class WorkerLogWriter implements LogWriter {
  readonly #worker: Worker;
  /** Our end of the channel that carries batches to the storage worker (see the constructor). */
  readonly #port: MessagePort;
  readonly #checkpointer: Worker;
  #checkpointerGone = false;
  /** Outstanding messages by id, in id (= send) order. */
  readonly #waiting = new Map<number, { resolve: () => void; reject: (e: Error) => void }>();
  #next = 0;
  #dead: Error | undefined;

  /** `onCheckpointError` hears of failed checkpoints (they are retried; commits go on regardless). */
  constructor(path: string, onCheckpointError: (message: string) => void) {
    // Batches travel over a channel of our own, not the worker's parentPort: the worker drains it with
    // receiveMessageOnPort, which takes a MessagePort, and Deno's parentPort is not one. Replies come back on
    // parentPort, as before.
    const { port1, port2 } = new MessageChannel();
    this.#port = port1;
    this.#worker = new Worker(new URL("./log-worker.ts", import.meta.url), {
      workerData: { path, port: port2 },
      transferList: [port2],
    });
    this.#checkpointer = new Worker(new URL("./checkpoint-worker.ts", import.meta.url), { workerData: { path } });
    this.#checkpointer.on("message", (m: { error?: string }) => {
      if (m.error !== undefined) onCheckpointError(m.error);
    });
    this.#checkpointer.on("error", (err: Error) => onCheckpointError(err.message));
    this.#checkpointer.once("exit", () => {
      this.#checkpointerGone = true;
    });
    this.#worker.on("message", (m: Reply) => {
      const err = m.error === undefined ? undefined : logFailure(m.error, m.errcode);
      for (const [id, w] of this.#waiting) {
        if (id > m.upTo) break;
        this.#waiting.delete(id);
        if (err) w.reject(err);
        else w.resolve();
      }
    });
    const fail = (err: Error): void => {
      this.#dead = err;
      for (const w of this.#waiting.values()) w.reject(err);
      this.#waiting.clear();
    };
    this.#worker.on("error", fail);
    this.#worker.on("exit", (code) => {
      fail(new Error(`storage worker exited with code ${code}`));
      this.#port.close(); // nothing reads it any more
    });
  }

  #send(msg: Record<string, unknown>): Promise<void> {
    if (this.#dead) return Promise.reject(this.#dead);
    const id = ++this.#next;
    return new Promise((resolve, reject) => {
      this.#waiting.set(id, { resolve, reject });
      this.#port.postMessage({ ...msg, id });
    });
  }

  append(rows: LogRow[]): Promise<void> {
    return this.#send({ op: "append", rows });
  }

  compact(rev: number): Promise<void> {
    return this.#send({ op: "compact", rev });
  }

  resume(): Promise<void> {
    return this.#send({ op: "resume" });
  }

  probe(): Promise<void> {
    return this.#send({ op: "probe" });
  }

  async close(): Promise<void> {
    // The checkpointer closes its connection first, so the writer's close is the last one: it checkpoints and
    // removes the WAL.
    if (!this.#checkpointerGone) {
      const closed = new Promise<void>((resolve) => {
        this.#checkpointer.once("exit", () => resolve());
        this.#checkpointer.on("message", (m: { closed?: boolean }) => {
          if (m.closed) resolve();
        });
      });
      this.#checkpointer.postMessage({ op: "close" });
      await closed;
      await this.#checkpointer.terminate();
    }
    if (!this.#dead) await this.#send({ op: "close" });
    this.#port.close();
    await this.#worker.terminate();
  }
}
