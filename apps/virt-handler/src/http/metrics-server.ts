/**
 * virt-handler's metrics port (KubeVirt: 8185): `/metrics` (Prometheus text of the handler's registry: workqueue,
 * reconcile and REST client series, per-VMI kubevirt_vmi_* series) and `/healthz`. Plain HTTP on purpose: both are
 * read-only, GET only, and carry no guest data (no console bytes, no memory, no disk contents: names, phases and
 * counters a VMI's readers already see through the API), which is what kubelet probes and Prometheus scrape without
 * credentials. Bound to 127.0.0.1 unless `--metrics-host` says otherwise (the release: the pod IP).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { exposition, type Registry } from "@kvt/observability";

/** Serves `registry` on `host`:`port` (0 = any); resolves with the server and its port. */
export async function startMetricsServer(
  registry: Registry,
  port: number,
  host = "127.0.0.1",
): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { "content-type": "text/plain", allow: "GET, HEAD" }).end("read-only");
      return;
    }
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
    server.listen(port, host, () => resolve());
  });
  return { server, port: (server.address() as AddressInfo).port };
}
