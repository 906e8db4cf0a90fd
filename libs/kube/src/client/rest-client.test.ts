import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Registry } from "prom-client";
import { afterEach, describe, expect, it } from "vitest";
import { ApiError } from "../errors.ts";
import { kubeConfigFor } from "./kube-config.ts";
import { type RawWatchEvent, RestClient } from "./rest-client.ts";

let server: Server | undefined;
async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  server = createServer(handler);
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  server = undefined;
});

function watchOnce(
  client: RestClient,
  path = "/api/v1/pods",
): { events: RawWatchEvent[]; done: Promise<unknown>; handle: ReturnType<RestClient["watch"]> } {
  const events: RawWatchEvent[] = [];
  let settle: (error: unknown) => void = () => {};
  const done = new Promise<unknown>((resolve) => (settle = resolve));
  const handle = client.watch(path, { resourceVersion: "7" }, (e) => events.push(e), settle);
  return { events, done, handle };
}

describe("RestClient", () => {
  it("sends requests over one kept-alive connection, with the bearer token and JSON body", async () => {
    const sockets = new Set<unknown>();
    const seen: { auth?: string; type?: string; body: string }[] = [];
    const url = await serve((req, res) => {
      sockets.add(req.socket);
      let body = "";
      req.on("data", (c: Buffer) => (body += c.toString()));
      req.on("end", () => {
        seen.push({ auth: req.headers.authorization, type: req.headers["content-type"], body });
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ echoed: body.length }));
      });
    });
    const client = new RestClient(kubeConfigFor(url, "tok"));
    for (let i = 0; i < 5; i++)
      expect(await client.request({ method: "PUT", path: "/api/v1/x", body: { i } })).toEqual({ echoed: 7 });
    expect(sockets.size).toBe(1);
    expect(seen[4]).toEqual({ auth: "Bearer tok", type: "application/json", body: '{"i":4}' });
  });

  it("parses watch events split across chunks and several per chunk, with the query it was given", async () => {
    let query = "";
    const url = await serve((req, res) => {
      query = req.url ?? "";
      res.writeHead(200, { "content-type": "application/json" });
      const a = JSON.stringify({ type: "ADDED", object: { metadata: { name: "a", resourceVersion: "8" } } });
      const b = JSON.stringify({ type: "MODIFIED", object: { metadata: { name: "é", resourceVersion: "9" } } });
      const bytes = Buffer.from(`${a}\n${b}\n${a}\n`);
      res.write(bytes.subarray(0, 10));
      // Split inside the multi-byte "é" of the second event.
      const cut = bytes.indexOf(Buffer.from("é")) + 1;
      setTimeout(() => res.write(bytes.subarray(10, cut)), 5);
      setTimeout(() => res.end(bytes.subarray(cut)), 10);
    });
    const { events, done } = watchOnce(new RestClient(kubeConfigFor(url)));
    expect(await done).toBeNull();
    expect(new URL(query, url).searchParams.get("watch")).toBe("true");
    expect(new URL(query, url).searchParams.get("resourceVersion")).toBe("7");
    expect(events.map((e) => `${e.type} ${(e.object as { metadata: { name: string } }).metadata.name}`)).toEqual([
      "ADDED a",
      "MODIFIED é",
      "ADDED a",
    ]);
  });

  it("ends a watch answered with an HTTP error with an ApiError carrying the Status", async () => {
    const url = await serve((_req, res) => {
      res.writeHead(410, { "content-type": "application/json" });
      res.end(JSON.stringify({ kind: "Status", code: 410, reason: "Expired", message: "too old resource version" }));
    });
    const error = await watchOnce(new RestClient(kubeConfigFor(url))).done;
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).code).toBe(410);
    expect((error as ApiError).reason).toBe("Expired");
  });

  it("ends a silent watch with a TimeoutError, and a stopped watch without calling onDone", async () => {
    const url = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.flushHeaders();
    });
    const quiet = watchOnce(new RestClient(kubeConfigFor(url), { watchIdleTimeoutMs: 50 }));
    expect(((await quiet.done) as Error).name).toBe("TimeoutError");

    const stopped = watchOnce(new RestClient(kubeConfigFor(url), { watchIdleTimeoutMs: 50 }));
    (await stopped.handle).stop();
    const outcome = await Promise.race([stopped.done, new Promise((r) => setTimeout(() => r("not called"), 150))]);
    expect(outcome).toBe("not called");
  });
});

describe("RestClient timeouts", () => {
  it("fails a request the server never answers with a TimeoutError, and the next request still works", async () => {
    let calls = 0;
    const url = await serve((_req, res) => {
      if (calls++ === 0) return; // hang the first request
      res.writeHead(200, { "content-type": "application/json" });
      res.end("{}");
    });
    const client = new RestClient(kubeConfigFor(url), { requestTimeoutMs: 100 });
    const error = await client.request({ method: "GET", path: "/api/v1/x" }).catch((e: unknown) => e);
    expect((error as Error).name).toBe("TimeoutError");
    expect(await client.request({ method: "GET", path: "/api/v1/x" })).toEqual({});
  });

  it("does not time out a kept-alive connection that merely sat idle between requests", async () => {
    const url = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end("{}");
    });
    const client = new RestClient(kubeConfigFor(url), { requestTimeoutMs: 100 });
    expect(await client.request({ method: "GET", path: "/api/v1/x" })).toEqual({});
    await new Promise((r) => setTimeout(r, 250));
    expect(await client.request({ method: "GET", path: "/api/v1/x" })).toEqual({});
  });
});

describe("RestClient metrics", () => {
  it("two clients on one registry count into the same series", async () => {
    const url = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end("{}");
    });
    const registry = new Registry();
    const a = new RestClient(kubeConfigFor(url), { registry });
    const b = new RestClient(kubeConfigFor(url), { registry });
    await a.request({ method: "GET", path: "/api/v1/namespaces/d/pods/p" });
    await b.request({ method: "GET", path: "/api/v1/namespaces/d/pods/p" });
    expect(await registry.metrics()).toMatch(
      /kubevirt_rest_client_requests_total\{[^}]*resource="pods",verb="GET"\} 2/,
    );
  });
});
