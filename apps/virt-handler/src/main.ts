#!/usr/bin/env node
/**
 * virt-handler: composition root. Node agent: runs this node's VirtualMachineInstances through their launchers
 * and reports their status. One per node; launchers are found in the node's socket directory (the launcher Pod's
 * KUBEVIRT_SOCKET_DIR), and virt-api reaches this process on --port (KubeVirt's 8186).
 * Exit codes: 0 stopped by a signal, 2 bad arguments, 3 could not start.
 */
import { readFileSync } from "node:fs";
import { loadKubeConfig } from "@kvt/kube";
import { createLogger, createMetricsRegistry, setupTracing } from "@kvt/observability";
import { main } from "@kvt/runtime";
import pkg from "../package.json" with { type: "json" };
import { startHandlerApp } from "./handler-app.ts";
import { startMetricsServer } from "./http/metrics-server.ts";

await main({
  name: "virt-handler",
  version: pkg.version,
  summary: "Node agent: runs this node's VirtualMachineInstances through their launchers and reports their status.",
  usage: "--node-name NAME [--kubeconfig FILE] [--socket-dir DIR[,DIR]] [--port 8186]",
  flags: {
    "node-name": { type: "string" },
    kubeconfig: { type: "string" },
    "socket-dir": { type: "string" },
    port: { type: "string" },
    "metrics-port": { type: "string" },
    host: { type: "string" },
    "tls-cert": { type: "string" },
    "tls-key": { type: "string" },
    "client-ca": { type: "string" },
    "log-level": { type: "string" },
  },
  details: [
    "  --node-name NAME      this node (env NODE_NAME)",
    "  --kubeconfig FILE     the cluster (else KUBECONFIG, ~/.kube/config, or in-cluster)",
    "  --socket-dir DIRS     where this node's launchers listen, comma-separated",
    "                        (env KUBEVIRT_SOCKET_DIR; default /var/run/kubevirt/sockets)",
    "  --port N, --host H    the server virt-api calls (default 8186 on 0.0.0.0; 0 = any free port)",
    "  --tls-cert/--tls-key  serve HTTPS; --client-ca also requires client certificates",
    "  --metrics-port N      serve /metrics and /healthz on 127.0.0.1:N (default 8185; 0 = any)",
  ],
  async run({ values }, signal) {
    const nodeName = values["node-name"] ?? process.env.NODE_NAME;
    if (!nodeName) {
      process.stderr.write("virt-handler: --node-name (or NODE_NAME) is required\n");
      return 2;
    }
    const port = Number(values.port ?? 8186);
    if (!Number.isInteger(port) || port < 0 || port > 65_535) {
      process.stderr.write(`virt-handler: --port ${values.port ?? ""} is not a port\n`);
      return 2;
    }
    const logger = createLogger({
      component: "virt-handler",
      level: (values["log-level"] ?? process.env.LOG_LEVEL ?? "info") as "info",
    }).child({ node: nodeName });
    const tracing = setupTracing({
      serviceName: "virt-handler",
      serviceVersion: pkg.version,
      attributes: { "k8s.node.name": nodeName },
    });
    try {
      const tls =
        values["tls-cert"] && values["tls-key"]
          ? {
              cert: readFileSync(values["tls-cert"], "utf8"),
              key: readFileSync(values["tls-key"], "utf8"),
              ...(values["client-ca"] ? { ca: readFileSync(values["client-ca"], "utf8") } : {}),
            }
          : undefined;
      const socketDirs = (values["socket-dir"] ?? process.env.KUBEVIRT_SOCKET_DIR ?? "/var/run/kubevirt/sockets")
        .split(",")
        .filter((d) => d.length > 0);
      const registry = createMetricsRegistry();
      const metrics = await startMetricsServer(registry, Number(values["metrics-port"] ?? 8185));
      logger.info({ port: metrics.port }, "serving /metrics");
      const app = await startHandlerApp({
        nodeName,
        kubeConfig: loadKubeConfig(values.kubeconfig ? { kubeconfig: values.kubeconfig } : {}),
        socketDirs,
        logger,
        registry,
        port,
        host: values.host ?? "0.0.0.0",
        ...(tls ? { tls } : {}),
      });
      await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
      logger.info("stopping; launchers keep running");
      await app.stop();
      metrics.server.close();
      return 0;
    } catch (error) {
      logger.error({ err: error }, "virt-handler cannot run");
      return 3;
    } finally {
      await tracing.shutdown();
      logger.flush();
    }
  },
});
