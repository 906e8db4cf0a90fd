/**
 * The durable revision log on `node:sqlite`, kine-style: one table of rows, one global monotonic revision.
 *
 *   kv(rev INTEGER PRIMARY KEY, coll TEXT, id TEXT, value TEXT, prev_rev INTEGER, deleted INTEGER)
 *   meta(k TEXT PRIMARY KEY, v INTEGER)          -- 'compact' = highest compacted revision
 *
 *   write path:  append(rows)  ->  BEGIN; INSERT ...; COMMIT   (one transaction per call = group commit)
 *   read path:   open() loads the latest row of every live key, and the rows after the compact revision
 *                (joined with their previous row) to rebuild the watch history.
 *
 * Fsync policy: WAL with `synchronous=FULL`: every COMMIT fsyncs the WAL, so the rows of an `append` are on disk
 * when it returns. The storage worker passes every batch queued at the time of a commit to one `append`, so
 * concurrent writes share one fsync; the server acknowledges a write only after the `append` holding it returned.
 * Checkpoints (WAL pages copied into the database file, which is then fsynced) run on a second connection in their
 * own thread (`checkpoint()`, every 100 ms), so a commit does not wait for one; SQLite's own checkpoint after a
 * commit, every 1000 WAL pages, then finds little or nothing left to copy. The in-memory mode (`:memory:`) is for
 * tests.
 */
import { DatabaseSync, type StatementSync } from "node:sqlite";

/** One stored row. `value` is the object's JSON (the last state, for a deletion). */
export interface LogRow {
  rev: number;
  coll: string;
  id: string;
  value: string;
  prevRev: number;
  deleted: boolean;
}

/** A row of the history, with the previous state of its key. */
export interface HistoryRow extends LogRow {
  prevValue: string | null;
}

interface RawRow {
  rev: number;
  coll: string;
  id: string;
  value: string;
  prev_rev: number;
  deleted: number;
  prev_value?: string | null;
}

function fromRaw(r: RawRow): HistoryRow {
  return {
    rev: r.rev,
    coll: r.coll,
    id: r.id,
    value: r.value,
    prevRev: r.prev_rev,
    deleted: r.deleted === 1,
    prevValue: r.prev_value ?? null,
  };
}

/** The SQLite revision log. */
export class SqliteLog {
  readonly #db: DatabaseSync;
  readonly #insert: StatementSync;

  /** Opens (creating if needed) the log at `path`, or an in-memory log for `":memory:"`. */
  constructor(path: string) {
    this.#db = new DatabaseSync(path);
    if (path !== ":memory:") {
      // Another connection to the file (the log and checkpoint workers, a store closing as the next one opens) may
      // hold its lock for a moment: wait for it rather than fail with "database is locked".
      this.#db.exec("PRAGMA busy_timeout=10000");
      this.#db.exec("PRAGMA journal_mode=WAL");
      this.#db.exec("PRAGMA synchronous=FULL");
    }
    this.#db.exec(`CREATE TABLE IF NOT EXISTS kv (
      rev INTEGER PRIMARY KEY, coll TEXT NOT NULL, id TEXT NOT NULL, value TEXT NOT NULL,
      prev_rev INTEGER NOT NULL, deleted INTEGER NOT NULL)`);
    this.#db.exec("CREATE INDEX IF NOT EXISTS kv_key ON kv (coll, id, rev)");
    this.#db.exec("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v INTEGER NOT NULL)");
    this.#insert = this.#db.prepare(
      "INSERT INTO kv (rev, coll, id, value, prev_rev, deleted) VALUES (?, ?, ?, ?, ?, ?)",
    );
  }

  /**
   * Appends rows in one transaction; durable when it returns. On failure nothing of it is stored and the error
   * thrown is the cause (SQLITE_FULL, SQLITE_IOERR...), not a failed ROLLBACK: SQLite may already have rolled the
   * transaction back itself (it does on a full disk).
   */
  append(rows: readonly LogRow[]): void {
    if (rows.length === 0) return;
    this.#transaction(() => {
      for (const r of rows) this.#insert.run(r.rev, r.coll, r.id, r.value, r.prevRev, r.deleted ? 1 : 0);
    });
  }

  /** Commits a one-row write to `meta` (the store's disk probe after a failed commit). */
  probe(): void {
    this.#transaction(() => {
      this.#db
        .prepare("INSERT INTO meta (k, v) VALUES ('probe', ?) ON CONFLICT(k) DO UPDATE SET v = excluded.v")
        .run(Date.now());
    });
  }

  #transaction(body: () => void): void {
    this.#db.exec("BEGIN");
    try {
      body();
      this.#db.exec("COMMIT");
    } catch (err) {
      if (this.#db.isTransaction) {
        try {
          this.#db.exec("ROLLBACK");
        } catch {
          // The first error says what went wrong; a failed rollback only repeats it (the transaction is gone).
        }
      }
      throw err;
    }
  }

  /** The highest revision ever written (0 for an empty log). */
  currentRevision(): number {
    const r = this.#db.prepare("SELECT MAX(rev) AS m FROM kv").get() as { m: number | null } | undefined;
    return Math.max(r?.m ?? 0, this.compactRevision());
  }

  /** The highest compacted revision. */
  compactRevision(): number {
    const r = this.#db.prepare("SELECT v FROM meta WHERE k = 'compact'").get() as { v: number } | undefined;
    return r?.v ?? 0;
  }

  /** The latest row of every key that is not deleted. */
  liveRows(): LogRow[] {
    const rows = this.#db
      .prepare(
        `SELECT k.* FROM kv k JOIN (SELECT coll, id, MAX(rev) AS r FROM kv GROUP BY coll, id) m ON k.rev = m.r
         WHERE k.deleted = 0 ORDER BY k.rev`,
      )
      .all() as unknown as RawRow[];
    return rows.map(fromRaw);
  }

  /** Every row after `rev`, with the previous value of its key, in revision order. */
  historyAfter(rev: number): HistoryRow[] {
    const rows = this.#db
      .prepare(
        `SELECT k.*, p.value AS prev_value FROM kv k LEFT JOIN kv p ON p.rev = k.prev_rev
         WHERE k.rev > ? ORDER BY k.rev`,
      )
      .all(rev) as unknown as RawRow[];
    return rows.map(fromRaw);
  }

  /**
   * Compacts history up to `rev`: drops every row at or below it that is superseded by a newer row of its key,
   * and tombstones at or below it.
   */
  compact(rev: number): void {
    this.#transaction(() => {
      this.#db
        .prepare(
          `DELETE FROM kv WHERE rev <= ? AND (deleted = 1 OR EXISTS
             (SELECT 1 FROM kv n WHERE n.coll = kv.coll AND n.id = kv.id AND n.rev > kv.rev AND n.rev <= ?))`,
        )
        .run(rev, rev);
      this.#db
        .prepare("INSERT INTO meta (k, v) VALUES ('compact', ?) ON CONFLICT(k) DO UPDATE SET v = excluded.v")
        .run(rev);
    });
  }

  /**
   * Copies the WAL's committed pages into the database file (PRAGMA wal_checkpoint(PASSIVE): never waits for, nor
   * blocks, the writer). Returns the WAL's size and how much of it is now in the database file, in pages.
   */
  checkpoint(): { walPages: number; checkpointedPages: number } {
    const r = this.#db.prepare("PRAGMA wal_checkpoint(PASSIVE)").get() as { log: number; checkpointed: number };
    return { walPages: r.log, checkpointedPages: r.checkpointed };
  }

  /** Closes the database (a WAL checkpoint happens on close). */
  close(): void {
    if (this.#db.isOpen) this.#db.close();
  }
}
