/**
 * A watch over HTTP: NDJSON on a chunked 200 whose headers are flushed at once (kubectl wait blocks otherwise).
 *
 *   {"type":"ADDED|MODIFIED|DELETED","object":{...}}\n      (as=Table: a one-row Table, column definitions only
 *   {"type":"BOOKMARK","object":{kind,apiVersion,metadata:{resourceVersion}}}\n      on the first event)
 *   {"type":"ERROR","object":<Status 410 Expired>}\n  then the end, for a compacted starting revision
 *
 * Ends cleanly after timeoutSeconds; stops when the client goes away (`res` close, not `req` close); a client that
 * stops reading (over 16 MiB queued) is cut off so it cannot exhaust the server's memory.
 */
import type { ServerResponse } from "node:http";
import type { Logger } from "pino";
import { ApiError } from "../errors.ts";
import { groupVersion, type ResourceDef } from "../resources/types.ts";
import { type IncludeObject, toTable } from "../table/table.ts";
import type { WatchEvent, WatchFilter, WatchHandle, WatchHub } from "./hub.ts";

/** Options of one watch request. */
export interface WatchRequest {
  readonly def: ResourceDef;
  readonly version: string;
  readonly filter: WatchFilter;
  /** undefined = from now with synthetic ADDED events. */
  readonly fromRev: number | undefined;
  /** WatchList: mark the end of the synthetic ADDED events with a `k8s.io/initial-events-end` bookmark. */
  readonly initialEventsEnd?: boolean;
  /** The revision the watch starts at (the store's revision when fromRev is undefined). */
  readonly startRev: number;
  readonly table: boolean;
  readonly include: IncludeObject;
  readonly bookmarks: boolean;
  readonly timeoutSeconds: number;
  readonly logger: Logger;
}

const MAX_QUEUED = 16 * 1024 * 1024;
/**
 * Encoded plain-JSON lines of this event-loop turn, shared by every watcher that receives the same event (encoded
 * once, not per watcher). Live events reach all their watchers in one turn, so the cache is dropped at its end
 * rather than kept alive with the watch history.
 */
let lines: Map<WatchEvent, Buffer> | undefined;

function encodedLine(ev: WatchEvent): Buffer {
  if (!lines) {
    lines = new Map();
    setImmediate(() => {
      lines = undefined;
    });
  }
  let line = lines.get(ev);
  if (line === undefined) {
    line = Buffer.from(`{"type":"${ev.type}","object":${ev.json}}\n`);
    lines.set(ev, line);
  }
  return line;
}
const BOOKMARK_EVERY_MS = 60_000;

/** Serves the watch until timeout or disconnect. */
export function serveWatch(res: ServerResponse, hub: WatchHub, w: WatchRequest): void {
  res.writeHead(200, {
    "Content-Type": "application/json",
    "Cache-Control": "no-cache, private",
    "Transfer-Encoding": "chunked",
  });
  res.flushHeaders();
  const preferredGv = groupVersion(w.def.group, w.def.versions[0]);
  const gv = groupVersion(w.def.group, w.version);
  let first = true;
  let lastRev = w.startRev;
  let closed = false;
  let handle: WatchHandle | undefined;
  const timers: NodeJS.Timeout[] = [];
  let corked = false;

  const close = (): void => {
    if (closed) return;
    closed = true;
    handle?.close();
    for (const t of timers) clearTimeout(t);
    if (corked) {
      corked = false;
      res.uncork();
    }
    if (!res.writableEnded) res.end();
  };

  const write = (line: string | Buffer): void => {
    if (closed) return;
    if (!corked) {
      // The events of one commit (the store publishes a batch's events together) go out in one TLS record /
      // syscall, and ahead of the writes' responses: the store resolves its writers after publishing, so this
      // microtask runs before their answers. kube-apiserver's watch event beat a status patch's response in 142 of
      // 300 patches (the scale bench), this server's never did (a setImmediate here), so a controller reacting to
      // another object right after its own write found its cache stale far more often; now it is about half.
      corked = true;
      res.cork();
      queueMicrotask(() => {
        if (!corked) return;
        corked = false;
        res.uncork();
      });
    }
    res.write(line);
    if (res.writableLength > MAX_QUEUED) {
      w.logger.warn({ resource: w.def.resource }, "watch client too slow; closing its watch");
      res.destroy();
      close();
    }
  };

  const send = (ev: WatchEvent): void => {
    lastRev = Math.max(lastRev, ev.rev);
    let body: string;
    if (w.table) {
      const obj = gv === preferredGv ? ev.obj : { ...ev.obj, apiVersion: gv };
      body = JSON.stringify(toTable(w.def, [obj], w.include, { resourceVersion: String(ev.rev) }, first));
      first = false;
    } else if (gv === preferredGv) {
      write(encodedLine(ev));
      return;
    } else body = JSON.stringify({ ...ev.obj, apiVersion: gv });
    write(`{"type":"${ev.type}","object":${body}}\n`);
  };

  const bookmark = (annotations?: Record<string, string>): void => {
    const metadata: Record<string, unknown> = { resourceVersion: String(lastRev), creationTimestamp: null };
    if (annotations) metadata.annotations = annotations;
    write(`${JSON.stringify({ type: "BOOKMARK", object: { kind: w.def.kind, apiVersion: gv, metadata } })}\n`);
  };

  res.on("close", close);
  try {
    handle = hub.watch(w.filter, w.fromRev, send);
  } catch (err) {
    if (err instanceof ApiError) {
      write(`${JSON.stringify({ type: "ERROR", object: err.status })}\n`);
      close();
      return;
    }
    throw err;
  }
  if (w.initialEventsEnd) {
    lastRev = Math.max(lastRev, w.startRev);
    bookmark({ "k8s.io/initial-events-end": "true" });
  }
  if (w.bookmarks) {
    const tick = (): void => {
      bookmark();
      timers[0] = setTimeout(tick, BOOKMARK_EVERY_MS);
    };
    timers[0] = setTimeout(tick, BOOKMARK_EVERY_MS);
  }
  timers.push(
    setTimeout(() => {
      if (w.bookmarks) bookmark();
      close();
    }, w.timeoutSeconds * 1000),
  );
}
