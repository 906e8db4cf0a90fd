/**
 * The object store: the current state in memory, every write appended to the durable log, and a window of
 * history for watches. One global revision numbers every write and is the objects' resourceVersion.
 *
 *   write(coll, id, obj)  --(sync)-->  state map updated, rev assigned, row queued
 *                         --(setImmediate)-->  LogWriter.append(batch)   (batches pipelined, group commit, fsync)
 *                         -->  history.push(events); listeners notified; write promises resolve
 *
 *   watch from rev N:  N < compactedRev -> 410 Expired;  else history events with rev > N, then live events.
 *
 * Writes are applied to memory synchronously, so a handler that reads and then writes without awaiting in between
 * needs no lock.
 *
 * Fsync policy: the writes of one event-loop turn form a batch, sent to the log at once without waiting for the
 * batches before it; the log commits whatever batches are queued in one SQLite transaction (WAL, synchronous=FULL:
 * one fsync of the WAL per transaction; see sqlite-log.ts). A write's promise resolves, and the server acknowledges
 * it, only once its batch and every earlier one are on disk, and events are published at that moment, in revision
 * order, so every acknowledged (or watched) write survives kill -9.
 *
 * Storage faults (disk full, I/O errors): a failed commit rejects its batch and every batch sent or queued after it
 * (they were applied to memory on top of it), and rolls their changes back in memory, newest first, so a refused
 * write is never visible to a later read and its events are never published; the log worker refuses what it already
 * received until the store tells it to resume, so the log stays a prefix of the revisions handed out. Revisions of
 * refused writes are not reused. Reads and watches go on from memory. The store then reports itself unhealthy
 * ({@link Store.health}, /readyz) and probes the disk every second; the first commit or probe that succeeds makes it
 * healthy again: writes resume by themselves when space returns.
 */
import type { Logger } from "pino";
import { type ApiError, expired, statusError } from "../errors.ts";
import type { KubeObject } from "../types.ts";
import { type LogWriter, SyncLogWriter, WorkerLogWriter } from "./log-writer.ts";
import { type LogRow, SqliteLog } from "./sqlite-log.ts";

/** A stored object at its revision. `json` is its serialized form, reused by list responses. */
export interface Entry {
  readonly coll: string;
  readonly id: string;
  readonly rev: number;
  readonly obj: KubeObject;
  readonly json: string;
}

/** A committed change. */
export interface StoreEvent {
  readonly rev: number;
  readonly type: "ADDED" | "MODIFIED" | "DELETED";
  readonly coll: string;
  readonly id: string;
  readonly obj: KubeObject;
  readonly json: string;
  readonly prev: KubeObject | undefined;
  readonly time: number;
}

/** Receives committed events in revision order. */
export type StoreListener = (ev: StoreEvent) => void;

/** Options for {@link Store.open}. */
export interface StoreOptions {
  /** The SQLite file, or undefined for an in-memory store. */
  readonly path?: string;
  /** Keep events at least this long (default 10 minutes). */
  readonly historyMs?: number;
  /** Keep at least this many events (default 100,000). */
  readonly historyMinEvents?: number;
  readonly logger: Logger;
}

interface Pending {
  rows: LogRow[];
  events: StoreEvent[];
  /** What each row replaced in memory (undone, newest first, if the batch is refused). */
  undo: { coll: string; id: string; prev: Entry | undefined }[];
  waiters: { resolve: () => void; reject: (e: unknown) => void }[];
}

/**
 * etcd's default --max-request-bytes (1.5 MiB): the largest object kube-apiserver can store. Bigger objects are
 * refused before they touch memory or the log.
 */
export const MAX_OBJECT_BYTES = 1.5 * 1024 * 1024;

/** SQLite's result code for a full disk or database (SQLITE_FULL). */
const SQLITE_FULL = 13;

/** How often an unhealthy store probes whether the disk takes writes again. */
const PROBE_EVERY_MS = 1000;

/** The store's health, as /readyz reports it. */
export type StoreHealth =
  | { readonly ok: true }
  | { readonly ok: false; readonly reason: string; readonly since: number };

/** An error from the log (a failed commit), with SQLite's result code when there is one. */
export interface LogFailure extends Error {
  errcode?: number;
}

/**
 * The Status a refused write answers. A full disk is what kube-apiserver answers for etcd's NOSPACE alarm (a 500
 * whose message says the database space is exceeded); other failures are a 500 InternalError naming the storage.
 */
export function storageWriteError(err: unknown): ApiError {
  const message = err instanceof Error ? err.message : String(err);
  const code = (err as LogFailure | undefined)?.errcode;
  if (code === SQLITE_FULL || /database or disk is full|ENOSPC|no space/i.test(message))
    return statusError(500, "", `storage: database space exceeded: ${message} (write refused; nothing was stored)`);
  return statusError(500, "InternalError", `Internal error occurred: storage write failed: ${message}`, {
    causes: [{ reason: "UnexpectedServerResponse", message }],
  });
}

/** 413 for an object larger than etcd's request limit (kube-apiserver passes etcd's "request is too large"). */
function objectTooLarge(bytes: number): ApiError {
  return statusError(
    413,
    "RequestEntityTooLarge",
    `Request entity too large: the object is ${bytes} bytes, the storage limit is ${MAX_OBJECT_BYTES} (etcdserver: request is too large)`,
  );
}

function byteSize(json: string): number {
  // UTF-8 takes at most 3 bytes per UTF-16 unit: short strings need no count.
  return json.length * 3 <= MAX_OBJECT_BYTES ? json.length : Buffer.byteLength(json, "utf8");
}

/** The store. */
export class Store {
  readonly #writer: LogWriter;
  /** Settles when the newest batch sent to the log has been handled (committed or failed); never rejects. */
  #lastBatch: Promise<void> = Promise.resolve();
  readonly #logger: Logger;
  readonly #state = new Map<string, Map<string, Entry>>();
  readonly #history: StoreEvent[] = [];
  #historyHead = 0;
  #rev: number;
  #compacted: number;
  #pending: Pending | undefined;
  /** Batches sent to the log and not yet answered, in revision order. */
  #inflight: Pending[] = [];
  /** Set while the last commit (or probe) failed. */
  #unhealthy: { reason: string; since: number } | undefined;
  #probeTimer: NodeJS.Timeout | undefined;
  #closed = false;
  readonly #listeners = new Set<StoreListener>();
  readonly #historyMs: number;
  readonly #historyMin: number;

  private constructor(options: StoreOptions) {
    this.#logger = options.logger;
    this.#historyMs = options.historyMs ?? 10 * 60_000;
    this.#historyMin = options.historyMinEvents ?? 100_000;
    const log = new SqliteLog(options.path ?? ":memory:");
    this.#rev = log.currentRevision();
    this.#compacted = log.compactRevision();
    for (const row of log.liveRows()) {
      const obj = JSON.parse(row.value) as KubeObject;
      this.#collection(row.coll).set(row.id, { coll: row.coll, id: row.id, rev: row.rev, obj, json: row.value });
    }
    const now = Date.now();
    for (const h of log.historyAfter(this.#compacted)) {
      const type = h.deleted ? "DELETED" : h.prevValue === null || h.prevRev === 0 ? "ADDED" : "MODIFIED";
      const prev = h.prevValue === null ? undefined : (JSON.parse(h.prevValue) as KubeObject);
      const obj = JSON.parse(h.value) as KubeObject;
      this.#history.push({ rev: h.rev, type, coll: h.coll, id: h.id, obj, json: h.value, prev, time: now });
    }
    if (options.path) {
      log.close();
      this.#writer = new WorkerLogWriter(options.path, (message) =>
        this.#logger.warn({ err: message }, "WAL checkpoint failed; retrying"),
      );
    } else this.#writer = new SyncLogWriter(log);
  }

  /** Opens the store, loading state and history from the log. */
  static open(options: StoreOptions): Store {
    return new Store(options);
  }

  /** The current global revision (the list resourceVersion). */
  get revision(): number {
    return this.#rev;
  }

  /** Events at or below this revision are gone; a watch from an older revision is 410. */
  get compactedRevision(): number {
    return this.#compacted;
  }

  #collection(coll: string): Map<string, Entry> {
    let m = this.#state.get(coll);
    if (!m) {
      m = new Map();
      this.#state.set(coll, m);
    }
    return m;
  }

  /** The current entry of `coll`/`id`. */
  get(coll: string, id: string): Entry | undefined {
    return this.#state.get(coll)?.get(id);
  }

  /** Every entry of a collection whose id starts with `idPrefix` (e.g. `ns/`), in id order. */
  list(coll: string, idPrefix = ""): Entry[] {
    const m = this.#state.get(coll);
    if (!m) return [];
    const out: Entry[] = [];
    for (const e of m.values()) if (e.id.startsWith(idPrefix)) out.push(e);
    out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return out;
  }

  /**
   * Creates or replaces `coll`/`id`; stamps the new resourceVersion on `obj`. Resolves once durable; rejects with a
   * Status (see {@link storageWriteError}) if the log refuses it, the write then being undone. Throws 413 for an
   * object over {@link MAX_OBJECT_BYTES}, before anything changes.
   */
  put(coll: string, id: string, obj: KubeObject): { entry: Entry; committed: Promise<void> } {
    const prev = this.get(coll, id);
    const rev = this.#rev + 1;
    const previousRv = obj.metadata.resourceVersion;
    obj.metadata.resourceVersion = String(rev);
    const json = JSON.stringify(obj);
    const bytes = byteSize(json);
    if (bytes > MAX_OBJECT_BYTES) {
      obj.metadata.resourceVersion = previousRv;
      throw objectTooLarge(bytes);
    }
    this.#rev = rev;
    const entry: Entry = { coll, id, rev, obj, json };
    this.#collection(coll).set(id, entry);
    const ev: StoreEvent = {
      rev,
      type: prev ? "MODIFIED" : "ADDED",
      coll,
      id,
      obj,
      json,
      prev: prev?.obj,
      time: Date.now(),
    };
    return {
      entry,
      committed: this.#queue({ rev, coll, id, value: json, prevRev: prev?.rev ?? 0, deleted: false }, ev, prev),
    };
  }

  /** Deletes `coll`/`id`; the DELETED event carries `last` with a new resourceVersion. Resolves once durable. */
  remove(coll: string, id: string, last: KubeObject): { entry: Entry; committed: Promise<void> } {
    const prev = this.get(coll, id);
    const rev = ++this.#rev;
    last.metadata.resourceVersion = String(rev);
    const json = JSON.stringify(last);
    this.#state.get(coll)?.delete(id);
    const entry: Entry = { coll, id, rev, obj: last, json };
    const ev: StoreEvent = { rev, type: "DELETED", coll, id, obj: last, json, prev: prev?.obj, time: Date.now() };
    return {
      entry,
      committed: this.#queue({ rev, coll, id, value: json, prevRev: prev?.rev ?? 0, deleted: true }, ev, prev),
    };
  }

  /** Healthy, or why not (the last commit or disk probe failed) and since when. */
  health(): StoreHealth {
    return this.#unhealthy ? { ok: false, ...this.#unhealthy } : { ok: true };
  }

  #queue(row: LogRow, ev: StoreEvent, prev: Entry | undefined): Promise<void> {
    if (!this.#pending) {
      this.#pending = { rows: [], events: [], undo: [], waiters: [] };
      setImmediate(() => this.flush());
    }
    const p = this.#pending;
    p.rows.push(row);
    p.events.push(ev);
    p.undo.push({ coll: row.coll, id: row.id, prev });
    return new Promise((resolve, reject) => p.waiters.push({ resolve, reject }));
  }

  /**
   * Sends the queued writes to the log now, without waiting for earlier batches: the log applies batches in order
   * and answers in order, so batches commit, and publish their events, in revision order.
   */
  flush(): void {
    const p = this.#pending;
    if (!p) return;
    this.#pending = undefined;
    this.#inflight.push(p);
    this.#lastBatch = this.#writer.append(p.rows).then(
      () => this.#committed(p),
      (err: unknown) => this.#refused(p, err),
    );
  }

  #committed(p: Pending): void {
    // Answers come in order: a committed batch is the oldest in flight.
    if (this.#inflight[0] === p) this.#inflight.shift();
    else this.#inflight = this.#inflight.filter((x) => x !== p);
    this.#markHealthy();
    for (const ev of p.events) {
      this.#history.push(ev);
      for (const l of this.#listeners) {
        try {
          l(ev);
        } catch (err) {
          this.#logger.error({ err }, "store listener failed");
        }
      }
    }
    for (const w of p.waiters) w.resolve();
  }

  /**
   * A batch the log refused: it and every batch after it (sent or still queued) are undone in memory, newest row
   * first, and rejected; then the log is told to take batches again.
   */
  #refused(p: Pending, err: unknown): void {
    const at = this.#inflight.indexOf(p);
    if (at < 0) return; // already undone with an earlier refused batch
    const undone = this.#inflight.splice(at);
    if (this.#pending) undone.push(this.#pending);
    this.#pending = undefined;
    for (let b = undone.length - 1; b >= 0; b--) {
      const batch = undone[b];
      for (let i = batch.undo.length - 1; i >= 0; i--) {
        const { coll, id, prev } = batch.undo[i];
        if (prev) this.#collection(coll).set(id, prev);
        else this.#state.get(coll)?.delete(id);
      }
    }
    const status = storageWriteError(err);
    const refused = undone.reduce((n, b) => n + b.rows.length, 0);
    this.#markUnhealthy(status.message, err, refused);
    for (const batch of undone) for (const w of batch.waiters) w.reject(status);
    if (!this.#closed)
      this.#writer.resume().catch((e: unknown) => this.#logger.error({ err: e }, "storage log did not resume"));
  }

  #markUnhealthy(reason: string, err: unknown, refusedWrites: number): void {
    if (!this.#unhealthy) {
      this.#unhealthy = { reason, since: Date.now() };
      this.#logger.error({ err, refusedWrites }, "storage commit failed; writes refused until the disk takes them");
    } else this.#logger.warn({ reason, refusedWrites }, "storage commit failed again");
    if (!this.#probeTimer && !this.#closed) {
      this.#probeTimer = setInterval(() => {
        this.#writer.probe().then(
          () => this.#markHealthy(),
          () => {
            // Still failing: stay unhealthy and probe again at the next tick.
          },
        );
      }, PROBE_EVERY_MS);
      this.#probeTimer.unref();
    }
  }

  #markHealthy(): void {
    if (this.#probeTimer) clearInterval(this.#probeTimer);
    this.#probeTimer = undefined;
    if (!this.#unhealthy) return;
    this.#logger.info({ unhealthyMs: Date.now() - this.#unhealthy.since }, "storage takes writes again");
    this.#unhealthy = undefined;
  }

  /** Subscribes to committed events. Returns the unsubscribe function. */
  subscribe(listener: StoreListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Committed events of `coll` after `rev`; throws 410 Expired if that history was compacted. */
  eventsSince(rev: number, coll: string): StoreEvent[] {
    if (rev < this.#compacted) throw expired(rev, this.#compacted);
    const h = this.#history;
    let lo = this.#historyHead;
    let hi = h.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (h[mid].rev <= rev) lo = mid + 1;
      else hi = mid;
    }
    const out: StoreEvent[] = [];
    for (let i = lo; i < h.length; i++) {
      const ev = h[i];
      if (ev.coll === coll) out.push(ev);
    }
    return out;
  }

  /**
   * Drops history older than the retention (both older than historyMs and beyond the newest historyMinEvents),
   * or, with `toRev`, everything up to that revision (tests force 410s this way). Compacts the log to match.
   */
  compact(toRev?: number, now: number = Date.now()): void {
    const h = this.#history;
    let head = this.#historyHead;
    if (toRev !== undefined) {
      while (head < h.length && h[head].rev <= toRev) head++;
      this.#compacted = Math.max(this.#compacted, Math.min(toRev, this.#rev));
    } else {
      while (h.length - head > this.#historyMin && now - h[head].time > this.#historyMs) {
        this.#compacted = h[head].rev;
        head++;
      }
    }
    if (head === this.#historyHead && toRev === undefined) return;
    this.#history.splice(0, head);
    this.#historyHead = 0;
    this.#writer.compact(this.#compacted).catch((err: unknown) => this.#logger.error({ err }, "log compaction failed"));
    this.#logger.debug({ compacted: this.#compacted }, "compacted history");
  }

  /** Commits pending writes and closes the log. */
  async close(): Promise<void> {
    this.flush();
    this.#closed = true;
    if (this.#probeTimer) clearInterval(this.#probeTimer);
    this.#probeTimer = undefined;
    await this.#lastBatch;
    await this.#writer.close();
  }
}
