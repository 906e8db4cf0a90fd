import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ApiError, kubeConfigFromFile } from "@kvt/kube";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocketServer } from "ws";
import { RestVirtClient } from "./client.ts";

describe("RestVirtClient", () => {
  let server: Server;
  let dir = "";
  let client: RestVirtClient;
  const seen: Array<{ method?: string; body: string; length?: string; auth?: string }> = [];
  const upgrades: IncomingHttpHeaders[] = [];

  beforeAll(async () => {
    // A plain Node HTTP server, parsing requests as the local API server does.
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        seen.push({
          method: req.method,
          body: Buffer.concat(chunks).toString(),
          length: req.headers["content-length"],
          auth: req.headers.authorization,
        });
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end(JSON.stringify({ kind: "Status", status: "Success" }));
      });
    });
    const wss = new WebSocketServer({ noServer: true });
    server.on("upgrade", (req, socket, head) => {
      upgrades.push(req.headers);
      if (req.url?.endsWith("/refused")) {
        const text = JSON.stringify({ kind: "Status", code: 409, reason: "Conflict", message: "VMI is not running" });
        socket.end(
          `HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\nContent-Length: ${text.length}\r\n\r\n${text}`,
        );
        return;
      }
      wss.handleUpgrade(req, socket, head, (ws) => ws.send("hello"));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    dir = mkdtempSync(join(tmpdir(), "virtctl-client-"));
    const kubeconfig = join(dir, "config");
    writeFileSync(
      kubeconfig,
      [
        "apiVersion: v1",
        "kind: Config",
        "current-context: c",
        `clusters: [{name: c, cluster: {server: "http://127.0.0.1:${(server.address() as AddressInfo).port}"}}]`,
        "contexts: [{name: c, context: {cluster: c, user: u, namespace: ns1}}]",
        "users: [{name: u, user: {token: t0k}}]",
      ].join("\n"),
    );
    client = new RestVirtClient(kubeConfigFromFile(kubeconfig));
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
    rmSync(dir, { recursive: true, force: true });
  });

  it("acts in the context's namespace unless -n names another, and says where it connects", () => {
    expect(client.namespace).toBe("ns1");
    expect(client.origin).toEqual({
      server: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/),
      kubeconfigFiles: [join(dir, "config")],
      context: "c",
    });
    expect(new RestVirtClient(kubeConfigFromFile(join(dir, "config")), "other").namespace).toBe("other");
  });

  it.each(["DELETE", "PUT", "POST"] as const)("a %s with a body arrives whole (Content-Length set)", async (method) => {
    const body = { apiVersion: "v1", kind: "DeleteOptions", dryRun: ["All"] };
    await expect(client.request({ method, path: "/apis/kubevirt.io/v1/x", body })).resolves.toMatchObject({
      status: "Success",
    });
    const last = seen.at(-1);
    expect(last).toEqual({
      method,
      body: JSON.stringify(body),
      length: String(JSON.stringify(body).length),
      auth: "Bearer t0k",
    });
  });

  it("opens a WebSocket with the context's credentials; a refused upgrade rejects with the Status", async () => {
    const ws = await client.websocket("/apis/subresources.kubevirt.io/v1/x/console", ["plain.kubevirt.io"]);
    const first = new Promise<string>((r) => ws.once("message", (d: Buffer) => r(d.toString())));
    ws.resume();
    expect(await first).toBe("hello");
    ws.close();
    expect(upgrades.at(-1)).toMatchObject({
      authorization: "Bearer t0k",
      "sec-websocket-protocol": "plain.kubevirt.io",
    });
    const refused = await client.websocket("/apis/x/refused", []).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ApiError);
    expect(refused).toMatchObject({ code: 409, reason: "Conflict", status: { message: "VMI is not running" } });
  });
});
