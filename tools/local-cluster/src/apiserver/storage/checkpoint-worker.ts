/**
 * The checkpointer: a second SQLite connection, in its own thread, that copies the WAL into the database file
 * every CHECKPOINT_EVERY_MS (PASSIVE: it never blocks the writer), so the storage worker's commits, and with them
 * the acknowledgements of writes, do not wait for checkpoints.
 *   {op:"close"} -> stops, closes its connection -> {closed: true}
 * A failed checkpoint is reported as {error} and retried at the next tick; the writer's own automatic checkpoints
 * still bound the WAL if this thread falls behind or is gone.
 */
import { type MessagePort, parentPort, workerData } from "node:worker_threads";
import { SqliteLog } from "./sqlite-log.ts";

const CHECKPOINT_EVERY_MS = 100;
const port = parentPort as MessagePort;
const log = new SqliteLog((workerData as { path: string }).path);
let lastError: string | undefined;
const timer = setInterval(() => {
  try {
    log.checkpoint();
    lastError = undefined;
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    // Report each distinct failure once, not every tick.
    if (message !== lastError) port.postMessage({ error: message });
    lastError = message;
  }
}, CHECKPOINT_EVERY_MS);

port.on("message", (m: { op: string }) => {
  if (m.op !== "close") return;
  clearInterval(timer);
  log.close();
  port.postMessage({ closed: true });
});
