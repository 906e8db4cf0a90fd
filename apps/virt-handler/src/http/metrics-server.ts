/**
 * virt-handler's metrics port (KubeVirt: 8185): `/metrics` (Prometheus text of the handler's registry: workqueue,
 * reconcile and REST client series) and `/healthz`. Loopback only.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { exposition, type Registry } from "@kvt/observability";

/** Serves `registry` on 127.0.0.1:`port` (0 = any); resolves with the server and its port. */
export async function startMetricsServer(registry: Registry, port: number): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (path === "/healthz") {
      res.writeHead(200, { "content-type": "text/plain" }).end("ok");
      return;
    }
    if (path !== "/metrics") {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found");
      return;
    }
    exposition(registry).then(
      ({ body, contentType }) => res.writeHead(200, { "content-type": contentType }).end(body),
      (error: unknown) => res.writeHead(500, { "content-type": "text/plain" }).end(String(error)),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve());
  });
  return { server, port: (server.address() as AddressInfo).port };
}
