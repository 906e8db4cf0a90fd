/**
 * The storage worker: owns the SQLite write connection of a durable store. Messages are handled in order:
 *   {op:"append", id, rows} -> one transaction (fsync)      -> {id}
 *   {op:"compact", id, rev} -> compaction                    -> {id}
 *   {op:"close", id}        -> close (WAL checkpoint)        -> {id}
 * Any failure is answered as {id, error}; the main thread then refuses further writes.
 */
import { parentPort, workerData } from "node:worker_threads";
import { type LogRow, SqliteLog } from "./sqlite-log.ts";

interface Msg {
  op: "append" | "compact" | "close";
  id: number;
  rows?: LogRow[];
  rev?: number;
}

const log = new SqliteLog((workerData as { path: string }).path);
parentPort?.on("message", (m: Msg) => {
  try {
    if (m.op === "append") log.append(m.rows ?? []);
    else if (m.op === "compact") log.compact(m.rev ?? 0);
    else log.close();
    parentPort?.postMessage({ id: m.id });
  } catch (err) {
    parentPort?.postMessage({ id: m.id, error: err instanceof Error ? err.message : String(err) });
  }
});
