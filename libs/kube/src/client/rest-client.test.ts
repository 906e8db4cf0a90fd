import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Registry } from "prom-client";
import { afterEach, describe, expect, it } from "vitest";
import { ApiError } from "../errors.ts";
import { kubeConfigFor } from "./kube-config.ts";
import { resourcePath } from "./resource-client.ts";
import { type RawWatchEvent, RestClient } from "./rest-client.ts";

let server: Server | undefined;
async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  server = createServer(handler);
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}
afterEach(async () => {
  const s = server;
  server = undefined;
  s?.closeAllConnections();
  if (s) await new Promise((resolve) => s.close(resolve));
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

    // A long idle bound here: on a loaded machine 50 ms may pass before stop() is called, and the timeout then ends
    // the watch first (CI 2026-11-27).
    const stopped = watchOnce(new RestClient(kubeConfigFor(url), { watchIdleTimeoutMs: 60_000 }));
    (await stopped.handle).stop();
    const outcome = await Promise.race([stopped.done, new Promise((r) => setTimeout(() => r("not called"), 150))]);
    expect(outcome).toBe("not called");
  });
});

describe("RestClient identity and errors", () => {
  /** Serves `answer` and records each request's impersonation and trace headers. */
  async function recording(answer: { code: number; body: string }): Promise<{ url: string; seen: unknown[] }> {
    const seen: unknown[] = [];
    const url = await serve((req, res) => {
      const h = req.headers;
      seen.push({
        user: h["impersonate-user"],
        groups: req.headersDistinct["impersonate-group"],
        uid: h["impersonate-uid"],
        scopes: req.headersDistinct["impersonate-extra-scopes%2fv1"],
        traceparent: h.traceparent,
      });
      res.writeHead(answer.code, { "content-type": "application/json" });
      res.end(answer.body);
    });
    return { url, seen };
  }

  it("acts as the client's user, or as the request's, through client-go's impersonation headers", async () => {
    const { url, seen } = await recording({ code: 200, body: "{}" });
    const client = new RestClient(kubeConfigFor(url), { impersonate: { username: "system:serviceaccount:k:api" } });
    await client.request({ method: "GET", path: "/api/v1/pods", headers: { traceparent: "00-a-b-01" } });
    const bob = { username: "bob", uid: "u1", groups: ["dev", "ops"], extra: { "scopes/v1": ["a", "b"] } };
    await client.request({ method: "GET", path: "/api/v1/pods", impersonate: bob });
    await new RestClient(kubeConfigFor(url)).request({ method: "GET", path: "/api/v1/pods" });
    expect(seen).toEqual([
      { user: "system:serviceaccount:k:api", traceparent: "00-a-b-01" },
      { user: "bob", groups: ["dev", "ops"], uid: "u1", scopes: ["a", "b"] },
      {},
    ]);
  });

  it("rejects with the server's Status, naming the request in the message only", async () => {
    const status = { kind: "Status", code: 409, reason: "Conflict", message: 'Operation cannot be fulfilled on x "a"' };
    const { url } = await recording({ code: 409, body: JSON.stringify(status) });
    const error = await new RestClient(kubeConfigFor(url))
      .request({ method: "PUT", path: "/api/v1/x" })
      .catch((e: unknown) => e as ApiError);
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ code: 409, reason: "Conflict", status });
    expect((error as ApiError).message).toBe('PUT /api/v1/x: Operation cannot be fulfilled on x "a"');
  });

  it.each([
    [404, "404 page not found", "NotFound", "the server could not find the requested resource"],
    [403, "no access", "Forbidden", "no access"],
    [
      502,
      "<html>bad gateway</html>",
      "InternalError",
      'an error on the server ("<html>bad gateway</html>") has prevented the request from succeeding',
    ],
  ])("words an answer %i without a Status as client-go does", async (code, body, reason, message) => {
    const { url } = await recording({ code, body });
    const error = (await new RestClient(kubeConfigFor(url))
      .request({ method: "GET", path: "/api/v1/x" })
      .catch((e: unknown) => e)) as ApiError;
    expect(error.status).toMatchObject({ kind: "Status", status: "Failure", code, reason, message });
    expect(error.status.details?.causes).toEqual([{ reason: "UnexpectedServerResponse", message: body }]);
  });

  it("gives what a WebSocket to the server needs: its URL, credentials and identity headers", async () => {
    const client = new RestClient(kubeConfigFor("http://127.0.0.1:1/prefix", "tok"));
    const target = await client.upgradeTarget("/apis/x/v1/console", { username: "bob" });
    expect(target).toEqual({
      url: "ws://127.0.0.1:1/prefix/apis/x/v1/console",
      headers: { Authorization: "Bearer tok", "Impersonate-User": "bob" },
      options: {},
    });
  });

  it("escapes names that would walk to another path", () => {
    const pods = { group: "", version: "v1", plural: "pods", kind: "Pod", namespaced: true };
    expect(resourcePath(pods, "..", "a/b")).toBe("/api/v1/namespaces/%2E%2E/pods/a%2Fb");
    expect(resourcePath(pods, "d", ".")).toBe("/api/v1/namespaces/d/pods/%2E");
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
    // Not shorter: the second request opens a new connection, which on a loaded CI machine (Deno) took > 100 ms.
    const client = new RestClient(kubeConfigFor(url), { requestTimeoutMs: 500 });
    const error = await client.request({ method: "GET", path: "/api/v1/x" }).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: "TimeoutError", code: "ETIMEDOUT" });
    expect(await client.request({ method: "GET", path: "/api/v1/x" })).toEqual({});
  });

  it("does not time out a kept-alive connection that merely sat idle between requests", async () => {
    const url = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end("{}");
    });
    const client = new RestClient(kubeConfigFor(url), { requestTimeoutMs: 500 });
    expect(await client.request({ method: "GET", path: "/api/v1/x" })).toEqual({});
    await new Promise((r) => setTimeout(r, 800));
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
