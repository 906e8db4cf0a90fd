import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HttpVirtClient } from "./client.ts";

describe("HttpVirtClient bodies", () => {
  let server: Server;
  let base = "";
  const seen: Array<{ method?: string; body: string; length?: string }> = [];

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
        });
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end(JSON.stringify({ kind: "Status", status: "Success" }));
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it.each(["DELETE", "PUT", "POST"] as const)("a %s with a body arrives whole (Content-Length set)", async (method) => {
    const client = new HttpVirtClient({
      server: new URL(base),
      namespace: "default",
      origin: { server: base, kubeconfigFiles: [] },
      apply: () => Promise.resolve(),
    });
    const body = { apiVersion: "v1", kind: "DeleteOptions", dryRun: ["All"] };
    await expect(client.request({ method, path: "/apis/kubevirt.io/v1/x", body })).resolves.toMatchObject({
      status: "Success",
    });
    const last = seen.at(-1);
    expect(last).toEqual({ method, body: JSON.stringify(body), length: String(JSON.stringify(body).length) });
  });
});
