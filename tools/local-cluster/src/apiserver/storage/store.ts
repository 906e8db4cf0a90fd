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
 * order, so every acknowledged (or watched) write survives kill -9. If a commit fails, it and every later batch are
 * refused and the store refuses further writes.
 */
import type { Logger } from "pino";
import { expired } from "../errors.ts";
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
  waiters: { resolve: () => void; reject: (e: unknown) => void }[];
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
  #failed: unknown;
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

  /** Creates or replaces `coll`/`id`; stamps the new resourceVersion on `obj`. Resolves once durable. */
  put(coll: string, id: string, obj: KubeObject): { entry: Entry; committed: Promise<void> } {
    this.#checkHealthy();
    const prev = this.get(coll, id);
    const rev = ++this.#rev;
    obj.metadata.resourceVersion = String(rev);
    const json = JSON.stringify(obj);
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
      committed: this.#queue({ rev, coll, id, value: json, prevRev: prev?.rev ?? 0, deleted: false }, ev),
    };
  }

  /** Deletes `coll`/`id`; the DELETED event carries `last` with a new resourceVersion. Resolves once durable. */
  remove(coll: string, id: string, last: KubeObject): { entry: Entry; committed: Promise<void> } {
    this.#checkHealthy();
    const prev = this.get(coll, id);
    const rev = ++this.#rev;
    last.metadata.resourceVersion = String(rev);
    const json = JSON.stringify(last);
    this.#state.get(coll)?.delete(id);
    const entry: Entry = { coll, id, rev, obj: last, json };
    const ev: StoreEvent = { rev, type: "DELETED", coll, id, obj: last, json, prev: prev?.obj, time: Date.now() };
    return {
      entry,
      committed: this.#queue({ rev, coll, id, value: json, prevRev: prev?.rev ?? 0, deleted: true }, ev),
    };
  }

  #checkHealthy(): void {
    if (this.#failed !== undefined)
      throw new Error(
        `storage failed: ${this.#failed instanceof Error ? this.#failed.message : JSON.stringify(this.#failed)}`,
      );
  }

  #queue(row: LogRow, ev: StoreEvent): Promise<void> {
    if (!this.#pending) {
      this.#pending = { rows: [], events: [], waiters: [] };
      setImmediate(() => this.flush());
    }
    const p = this.#pending;
    p.rows.push(row);
    p.events.push(ev);
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
    if (this.#failed !== undefined) {
      for (const w of p.waiters) w.reject(this.#failed);
      return;
    }
    this.#lastBatch = this.#writer.append(p.rows).then(
      () => this.#committed(p),
      (err: unknown) => {
        if (this.#failed === undefined) {
          this.#failed = err;
          this.#logger.fatal({ err }, "storage commit failed; refusing further writes");
        }
        for (const w of p.waiters) w.reject(err);
      },
    );
  }

  #committed(p: Pending): void {
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
    await this.#lastBatch;
    await this.#writer.close();
  }
}
