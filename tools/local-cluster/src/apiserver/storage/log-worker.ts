/**
 * The storage worker: owns the SQLite write connection of a durable store. Messages are handled in order:
 *   {op:"append", id, rows} -> rows written in a transaction (fsync)  -> {upTo: id}
 *   {op:"compact", id, rev} -> compaction                             -> {upTo: id}
 *   {op:"close", id}        -> close (WAL checkpoint)                 -> {upTo: id}
 *
 * Group commit across batches: the main thread does not wait for one batch before sending the next, so several
 * appends may be queued here when a commit ends. They are drained together (`receiveMessageOnPort`) into one
 * transaction, hence one fsync, and answered with one reply naming the highest id it covers. A failure is answered as
 * {upTo, error, errcode}; every later message is then refused too, so the log stays a prefix of the revisions the
 * main thread handed out, until {op:"resume"}: the main thread sends it once it has undone the refused batches, and
 * batches after it are tried again.
 *   {op:"resume", id}       -> clears the refusal                    -> {upTo: id}
 *   {op:"probe", id}        -> a one-row commit to test the disk     -> {upTo: id} or {upTo: id, error}
 */
import { type MessagePort, parentPort, receiveMessageOnPort, workerData } from "node:worker_threads";
import { type LogRow, SqliteLog } from "./sqlite-log.ts";

interface Msg {
  op: "append" | "compact" | "close" | "resume" | "probe";
  id: number;
  rows?: LogRow[];
  rev?: number;
}

/**
 * Batches come on `port`, a channel from the main thread (log-writer.ts): a MessagePort on every runtime, which
 * receiveMessageOnPort needs (Deno's parentPort is not one). Replies go back on parentPort.
 */
const { path, port } = workerData as { path: string; port: MessagePort };
const replies = parentPort as MessagePort;
const log = new SqliteLog(path);
let failure: { error: string; errcode?: number } | undefined;

function describe(err: unknown): { error: string; errcode?: number } {
  const errcode = (err as { errcode?: unknown }).errcode;
  return {
    error: err instanceof Error ? err.message : String(err),
    ...(typeof errcode === "number" ? { errcode } : {}),
  };
}

function run(upTo: number, action: () => void): void {
  if (failure === undefined) {
    try {
      action();
    } catch (err) {
      failure = describe(err);
    }
  }
  replies.postMessage(failure === undefined ? { upTo } : { upTo, ...failure });
}

port.on("message", (first: Msg) => {
  const queued = [first];
  for (let m = receiveMessageOnPort(port); m !== undefined; m = receiveMessageOnPort(port))
    queued.push(m.message as Msg);
  for (let i = 0; i < queued.length; ) {
    const m = queued[i];
    if (m.op !== "append") {
      i++;
      if (m.op === "compact") run(m.id, () => log.compact(m.rev ?? 0));
      else if (m.op === "resume") {
        failure = undefined;
        replies.postMessage({ upTo: m.id });
      } else if (m.op === "probe") {
        // A probe's failure refuses nothing after it (no batch depends on it).
        try {
          log.probe();
          replies.postMessage({ upTo: m.id });
        } catch (err) {
          replies.postMessage({ upTo: m.id, ...describe(err) });
        }
      } else {
        // Close even after a failure (what did commit stays readable, the file is released), and say it closed.
        log.close();
        replies.postMessage({ upTo: m.id });
      }
      continue;
    }
    const batches: LogRow[][] = [];
    let last = m.id;
    for (; i < queued.length && queued[i].op === "append"; i++) {
      batches.push(queued[i].rows ?? []);
      last = queued[i].id;
    }
    run(last, () => log.append(batches.flat()));
  }
});
