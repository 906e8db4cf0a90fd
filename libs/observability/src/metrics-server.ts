/**
 * The small HTTP endpoint every component serves for operations: `/metrics` (Prometheus text), `/healthz`
 * (liveness: the process answers), `/readyz` (readiness from a callback, e.g. "informers synced" or "leading") and any
 * further plain-text routes a component adds (virt-controller's `/leader`).
 *
 * Plain HTTP without authentication on purpose: every route is read-only (GET and HEAD only; other methods 405)
 * and carries no guest data (counters, phases and names, never console bytes, memory or disk contents), which is
 * what kubelet probes and Prometheus scrape. It binds 127.0.0.1 unless the component is given an address (the
 * release: the pod IP).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Registry } from "prom-client";

/** Options for {@link startMetricsServer}. */
export interface MetricsServerOptions {
  readonly registry: Registry;
  /** TCP port; 0 picks a free one. */
  readonly port: number;
  /** Bind address; default 127.0.0.1. */
  readonly host?: string;
  /** Readiness; default always ready. */
  readonly ready?: () => boolean;
  /** Called before each scrape (e.g. to refresh gauges computed from caches). */
  readonly beforeScrape?: () => void;
  /** Further plain-text endpoints by path, e.g. virt-controller's `/leader` (200 leading, 503 standby). */
  readonly routes?: Readonly<Record<string, () => { readonly status: number; readonly body: string }>>;
}

/** A running metrics server. */
export interface MetricsServer {
  /** The bound port (useful with port 0). */
  readonly port: number;
  readonly server: Server;
  close(): Promise<void>;
}

/** Starts the operations endpoint; resolves once listening. */
export async function startMetricsServer(options: MetricsServerOptions): Promise<MetricsServer> {
  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { "content-type": "text/plain", allow: "GET, HEAD" });
      res.end("read-only\n");
      return;
    }
    if (path === "/metrics") {
      options.beforeScrape?.();
      options.registry.metrics().then(
        (body) => {
          res.writeHead(200, { "content-type": options.registry.contentType });
          res.end(body);
        },
        (error: unknown) => {
          res.writeHead(500, { "content-type": "text/plain" });
          res.end(`cannot collect metrics: ${(error as Error).message}\n`);
        },
      );
      return;
    }
    if (path === "/healthz") {
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("ok\n");
      return;
    }
    if (path === "/readyz") {
      const ready = options.ready?.() ?? true;
      res.writeHead(ready ? 200 : 503, { "content-type": "text/plain" });
      res.end(ready ? "ok\n" : "not ready\n");
      return;
    }
    const route = path ? options.routes?.[path] : undefined;
    if (route) {
      const { status, body } = route();
      res.writeHead(status, { "content-type": "text/plain" });
      res.end(body);
      return;
    }
    res.writeHead(404, { "content-type": "text/plain" });
    res.end("not found\n");
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host ?? "127.0.0.1", () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    server,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
