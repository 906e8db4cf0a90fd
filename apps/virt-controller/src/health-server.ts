/**
 * The HTTP endpoints of virt-controller on its metrics port: `/metrics` (Prometheus text), `/healthz` (200 while the
 * process serves), `/leader` (200 on the leader, 503 on a standby, as KubeVirt's).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Registry } from "prom-client";

/** What the server reports. */
export interface HealthServerOptions {
  readonly registry: Registry;
  readonly isLeader: () => boolean;
  /** Called before each scrape (refresh gauges). */
  readonly beforeScrape?: () => void;
  /** TCP port (0 = any free port). */
  readonly port: number;
  /** Default 127.0.0.1. */
  readonly host?: string;
}

/** A running health server. */
export interface HealthServer {
  readonly port: number;
  close(): Promise<void>;
}

/** Starts the server; resolves once it listens. */
export async function startHealthServer(options: HealthServerOptions): Promise<HealthServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (path === "/metrics") {
      options.beforeScrape?.();
      options.registry
        .metrics()
        .then((body) => {
          res.writeHead(200, { "content-type": options.registry.contentType });
          res.end(body);
        })
        .catch((error: unknown) => {
          res.writeHead(500, { "content-type": "text/plain" });
          res.end(`metrics failed: ${String(error)}\n`);
        });
      return;
    }
    if (path === "/healthz") {
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("ok\n");
      return;
    }
    if (path === "/leader") {
      const leader = options.isLeader();
      res.writeHead(leader ? 200 : 503, { "content-type": "text/plain" });
      res.end(leader ? "leader\n" : "not leader\n");
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
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
