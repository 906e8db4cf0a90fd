/**
 * A scripted HTTP API server for this lib's own tests (not exported): answers lists from a map of objects and
 * streams watch events that the test pushes. Only what the informer and client tests need.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** One recorded request. */
export interface SeenRequest {
  method: string;
  url: string;
  contentType: string | undefined;
  authorization: string | undefined;
  body: string;
}

/** The scripted server. */
export interface TestServer {
  url: string;
  requests: SeenRequest[];
  /** Objects answered to lists, by key. */
  objects: Map<string, unknown>;
  listResourceVersion: string;
  /** Next status to answer a watch with (e.g. 410), once. */
  failNextWatch: number | undefined;
  /** Handler for non-list, non-watch requests. */
  handle: (req: SeenRequest, res: ServerResponse) => void;
  /** Sends a watch event on every open watch. */
  push(type: string, object: unknown): void;
  /** Ends every open watch (a server-side cut). */
  cutWatches(): void;
  openWatches(): number;
  close(): Promise<void>;
}

/** Starts a server on an ephemeral port. */
export async function startTestServer(): Promise<TestServer> {
  const watches = new Set<ServerResponse>();
  const state: TestServer = {
    url: "",
    requests: [],
    objects: new Map(),
    listResourceVersion: "1",
    failNextWatch: undefined,
    handle: (_req, res) => {
      res.writeHead(404, { "content-type": "application/json" });
      res.end(JSON.stringify({ kind: "Status", code: 404, reason: "NotFound", message: "not found" }));
    },
    push(type, object) {
      for (const w of watches) w.write(`${JSON.stringify({ type, object })}\n`);
    },
    cutWatches() {
      for (const w of watches) w.end();
      watches.clear();
    },
    openWatches: () => watches.size,
    close: () =>
      new Promise((resolve) => {
        for (const w of watches) w.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      const seen: SeenRequest = {
        method: req.method ?? "",
        url: req.url ?? "",
        contentType: req.headers["content-type"],
        authorization: req.headers.authorization,
        body,
      };
      state.requests.push(seen);
      const url = new URL(seen.url, "http://x");
      if (seen.method === "GET" && url.searchParams.get("watch") === "true") {
        if (state.failNextWatch) {
          const code = state.failNextWatch;
          state.failNextWatch = undefined;
          res.writeHead(code, { "content-type": "application/json" });
          res.end(JSON.stringify({ kind: "Status", code, reason: "Expired", message: "too old" }));
          return;
        }
        res.writeHead(200, { "content-type": "application/json" });
        res.flushHeaders();
        watches.add(res);
        res.on("close", () => watches.delete(res));
        return;
      }
      if (seen.method === "GET" && url.pathname.endsWith("s") && !url.pathname.includes("/leases/")) {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(
          JSON.stringify({
            metadata: { resourceVersion: state.listResourceVersion },
            items: [...state.objects.values()],
          }),
        );
        return;
      }
      state.handle(seen, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return state;
}
