/**
 * One watch stream: a GET with `watch=true` whose chunked answer is one JSON event per line, parsed straight off the
 * socket (no web streams, no readline).
 *
 * ```
 *   request ──200──> data ──lines──> onEvent(event) ... ──end──> onDone(null)
 *      │               └── nothing for idleTimeoutMs ──> onDone(TimeoutError)   (the informer resumes at once)
 *      ├──non-200──> onDone(ApiError{code, Status})                             (410: the informer relists)
 *      └──socket error, bad line, handler throw ──> onDone(error)                (the informer backs off, resumes)
 *   stop() ends it at any point; onDone is then never called.
 * ```
 */
import type { Agent, ClientRequest, IncomingMessage, OutgoingHttpHeaders, RequestOptions } from "node:http";
import { ApiError } from "../errors.ts";
import { answerStatus } from "../status.ts";

/** One watch event as the server sends it. */
export interface RawWatchEvent {
  readonly type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";
  readonly object: unknown;
}

/** A running watch; `stop()` ends it without calling `onDone` with an error. */
export interface WatchHandle {
  stop(): void;
}

/** What {@link openWatch} needs. */
export interface WatchStreamOptions {
  readonly hostname: string;
  readonly port: number;
  /** Path and query (`watch=true`, `resourceVersion`, selectors). */
  readonly path: string;
  /** `http.request` or `https.request`. */
  readonly send: (options: RequestOptions) => ClientRequest;
  readonly headers: OutgoingHttpHeaders;
  readonly agent: Agent;
  /** A watch that receives nothing for this long ends with a `TimeoutError` (ms). */
  readonly idleTimeoutMs: number;
  readonly onEvent: (event: RawWatchEvent) => void;
  /** Called exactly once, unless the watch is stopped: `null` for a clean end, else the error. */
  readonly onDone: (error: unknown) => void;
}

/** Opens a watch; resolves once the server answered (or the request failed) with the handle that stops it. */
export function openWatch(o: WatchStreamOptions): Promise<WatchHandle> {
  return new Promise((resolve) => {
    let finished = false;
    let idle: ReturnType<typeof setTimeout> | undefined;
    const req = o.send({
      hostname: o.hostname,
      port: o.port,
      path: o.path,
      method: "GET",
      headers: o.headers,
      agent: o.agent,
    });
    const stop = (): void => {
      finished = true;
      clearTimeout(idle);
      req.destroy();
    };
    const finish = (error: unknown): void => {
      if (finished) return;
      stop();
      o.onDone(error);
    };
    const resetIdle = (): void => {
      clearTimeout(idle);
      idle = setTimeout(() => finish(timeoutError(o.idleTimeoutMs)), o.idleTimeoutMs);
      idle.unref();
    };
    resetIdle();
    req.once("response", (res: IncomingMessage) => {
      resolve({ stop });
      res.setEncoding("utf8");
      if (res.statusCode === 200) readEvents(res, o, finish, resetIdle, () => finished);
      else {
        let text = "";
        res.on("data", (chunk: string) => (text += chunk));
        res.once("end", () => finish(httpError(res.statusCode ?? 0, text)));
      }
      res.once("error", (error) => finish(error));
    });
    req.once("error", (error) => {
      resolve({ stop });
      finish(error);
    });
    req.end();
  });
}

function readEvents(
  res: IncomingMessage,
  o: WatchStreamOptions,
  finish: (error: unknown) => void,
  resetIdle: () => void,
  finished: () => boolean,
): void {
  let pending = "";
  res.on("data", (chunk: string) => {
    resetIdle();
    pending += chunk;
    let start = 0;
    for (let nl = pending.indexOf("\n"); nl >= 0 && !finished(); nl = pending.indexOf("\n", start)) {
      const line = pending.slice(start, nl);
      start = nl + 1;
      if (line.trim() === "") continue;
      try {
        o.onEvent(JSON.parse(line) as RawWatchEvent);
      } catch (error) {
        // A garbled line or a throwing handler: end this watch with the error rather than crash the process or
        // skip an event; the informer logs it and resumes from its last resourceVersion.
        finish(new Error("Cannot process a watch event", { cause: error }));
        return;
      }
    }
    pending = pending.slice(start);
  });
  res.once("end", () => finish(null));
}

/** The error a watch ends with after `ms` of silence; the informer resumes at once on a `TimeoutError`. */
function timeoutError(ms: number): Error {
  const error = new Error(`The watch received nothing for ${ms} ms`);
  error.name = "TimeoutError";
  return error;
}

/** An HTTP error answer to a watch request, as an {@link ApiError} carrying its Status ({@link answerStatus}). */
function httpError(code: number, text: string): ApiError {
  const status = answerStatus(code, text);
  return new ApiError(`watch: HTTP ${code}: ${status.message ?? ""}`, code, status);
}
