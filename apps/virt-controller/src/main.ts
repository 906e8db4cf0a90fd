#!/usr/bin/env node
/**
 * virt-controller: composition root. Cluster controllers for VirtualMachines, VirtualMachineInstances and
 * migrations, leader-elected on the Lease `virt-controller` (15 s / 10 s / 2 s): only the leader runs informers and
 * controllers; losing the lease exits the process (KubeVirt: "leaderelection lost") so a fresh start campaigns again.
 */
import { hostname } from "node:os";
import {
  CORE_V1,
  isNotFound,
  type KubeObject,
  LeaderElector,
  type Lease,
  loadKubeConfig,
  RestClient,
  resourceClient,
} from "@kvt/kube";
import { createLogger, createMetricsRegistry, Gauge, setupTracing } from "@kvt/observability";
import { main } from "@kvt/runtime";
import { trace } from "@opentelemetry/api";
import pkg from "../package.json" with { type: "json" };
import { VirtControllerApp } from "./app.ts";
import { startHealthServer } from "./health-server.ts";

await main({
  name: "virt-controller",
  version: pkg.version,
  summary: "Cluster controllers for VirtualMachines, VirtualMachineInstances and migrations (leader-elected).",
  usage: "[--kubeconfig FILE] [--metrics-port N] [--namespace NS] [--log-level LEVEL]",
  flags: {
    kubeconfig: { type: "string" },
    "metrics-port": { type: "string" },
    namespace: { type: "string" },
    "log-level": { type: "string" },
  },
  details: [
    "  --kubeconfig FILE   API server credentials (default $KUBECONFIG, ~/.kube/config, or in-cluster)",
    "  --metrics-port N    serve /metrics, /healthz and /leader on 127.0.0.1:N (default 8182; 0 = any)",
    "  --namespace NS      namespace of the leader-election Lease (default $POD_NAMESPACE or kubevirt)",
  ],
  async run({ values }, signal) {
    const logger = createLogger({ component: "virt-controller", level: (values["log-level"] ?? "info") as "info" });
    const registry = createMetricsRegistry();
    const tracing = setupTracing({ serviceName: "virt-controller", serviceVersion: pkg.version });
    const transport = new RestClient(loadKubeConfig({ kubeconfig: values.kubeconfig }), {
      registry,
      userAgent: `virt-controller/${pkg.version}`,
    });
    const namespace = values.namespace ?? process.env.POD_NAMESPACE ?? "kubevirt";
    const identity = `${process.env.POD_NAME ?? hostname()}_${process.pid}`;
    const leading = new Gauge({
      name: "kubevirt_virt_controller_leading_status",
      help: "Indication for an operating virt-controller: 1 when this replica is the leader.",
      registers: [registry],
    });
    new Gauge({
      name: "kubevirt_virt_controller_ready_status",
      help: "Indication for a virt-controller that is ready to take the lead.",
      registers: [registry],
    }).set(1);
    const app = new VirtControllerApp({
      transport,
      logger,
      registry,
      tracer: trace.getTracer("virt-controller"),
      host: identity,
    });
    await ensureNamespace(transport, namespace);
    let exitCode = 0;
    const stopped = new AbortController();
    const elector: LeaderElector = new LeaderElector({
      leases: resourceClient<Lease>(transport, CORE_V1.leases),
      namespace,
      name: "virt-controller",
      identity,
      logger,
      onStartedLeading: () => {
        leading.set(1);
        app.start().catch((error: unknown) => {
          logger.error({ err: error }, "controllers failed to start");
          exitCode = 1;
          stopped.abort();
        });
      },
      onStoppedLeading: () => {
        leading.set(0);
        if (!signal.aborted) {
          logger.error("leaderelection lost");
          exitCode = 1;
          stopped.abort();
        }
      },
    });
    const health = await startHealthServer({
      registry,
      port: Number(values["metrics-port"] ?? 8182),
      isLeader: () => elector.isLeader,
      beforeScrape: () => app.updateMetrics(),
    });
    logger.info({ port: health.port, identity, namespace }, "virt-controller serving health and metrics");
    await elector.run(AbortSignal.any([signal, stopped.signal]));
    await app.stop();
    await health.close();
    await tracing.shutdown();
    logger.info("virt-controller stopped");
    return exitCode;
  },
});

/** Creates the Lease's namespace when it does not exist (a fresh local cluster has only the boot namespaces). */
async function ensureNamespace(transport: RestClient, name: string): Promise<void> {
  const namespaces = resourceClient<KubeObject>(transport, CORE_V1.namespaces);
  try {
    await namespaces.get("", name);
  } catch (error) {
    if (!isNotFound(error)) return;
    // Another replica may create it at the same moment; the Lease create reports any real problem.
    await namespaces.create({ metadata: { name } }).catch(() => undefined);
  }
}
