/**
 * The virt-controller process: logger, metrics, tracing, the health server, and leader election that starts the
 * controllers (`app.ts`) on the leader. Losing the lease ends the process with exit code 1.
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
import { createLogger, createMetricsRegistry, setupTracing, startMetricsServer } from "@kvt/observability";
import { trace } from "@opentelemetry/api";
import { VirtControllerApp } from "./app.ts";
import { ControllerMetrics } from "./metrics/controller-metrics.ts";

/** What main.ts parsed. */
export interface ControllerProcessOptions {
  readonly kubeconfig: string | undefined;
  /** Port of /metrics, /healthz and /leader (0 = any free port). */
  readonly metricsPort: number;
  /** Its address (default 127.0.0.1; the release passes the pod IP so probes and Prometheus reach it). */
  readonly metricsHost?: string;
  /** The install namespace: the Lease, the certificate Secrets and the kubevirt-ca ConfigMap. */
  readonly namespace: string;
  /** The launcher pods' image (default the pod template's `kubevirt/virt-launcher`). */
  readonly launcherImage?: string;
  readonly logLevel: string;
  readonly version: string;
}

/** Runs virt-controller until `signal` aborts or leadership is lost; resolves to the exit code. */
export async function runController(o: ControllerProcessOptions, signal: AbortSignal): Promise<number> {
  const logger = createLogger({ component: "virt-controller", level: o.logLevel as "info" });
  const registry = createMetricsRegistry();
  const tracing = setupTracing({ serviceName: "virt-controller", serviceVersion: o.version });
  const kubeConfig = loadKubeConfig({ kubeconfig: o.kubeconfig });
  const transport = new RestClient(kubeConfig, { registry, userAgent: `virt-controller/${o.version}` });
  // Lease renewals get their own connection pool (kube-controller-manager's separate leader-election client): in a
  // burst, the controllers' requests fill the shared pool and a renewal queued behind them could miss its deadline.
  const leaseTransport = new RestClient(kubeConfig, {
    registry,
    userAgent: `virt-controller/${o.version} leader-election`,
  });
  const namespace = o.namespace;
  const identity = `${process.env.POD_NAME ?? hostname()}_${process.pid}`;
  const metrics = new ControllerMetrics(registry);
  metrics.setLeading(false);
  metrics.setReady(true);
  const app = new VirtControllerApp({
    transport,
    logger,
    registry,
    metrics,
    tracer: trace.getTracer("virt-controller"),
    host: identity,
    namespace: o.namespace,
    ...(o.launcherImage ? { launcherImage: o.launcherImage } : {}),
  });
  await ensureNamespace(transport, namespace);
  let exitCode = 0;
  const stopped = new AbortController();
  const elector: LeaderElector = new LeaderElector({
    leases: resourceClient<Lease>(leaseTransport, CORE_V1.leases),
    namespace,
    name: "virt-controller",
    identity,
    logger,
    onStartedLeading: () => {
      metrics.setLeading(true);
      app.start().catch((error: unknown) => {
        logger.error({ err: error }, "controllers failed to start");
        exitCode = 1;
        stopped.abort();
      });
    },
    onStoppedLeading: () => {
      metrics.setLeading(false);
      if (!signal.aborted) {
        logger.error("leaderelection lost");
        exitCode = 1;
        stopped.abort();
      }
    },
  });
  // /metrics, /healthz, /readyz, and /leader (200 on the leader, 503 on a standby, as KubeVirt's).
  const health = await startMetricsServer({
    registry,
    port: o.metricsPort,
    host: o.metricsHost ?? "127.0.0.1",
    beforeScrape: () => app.updateMetrics(),
    routes: {
      "/leader": () => (elector.isLeader ? { status: 200, body: "leader\n" } : { status: 503, body: "not leader\n" }),
    },
  });
  logger.info({ port: health.port, identity, namespace }, "virt-controller serving health and metrics");
  await elector.run(AbortSignal.any([signal, stopped.signal]));
  await app.stop();
  await health.close();
  await tracing.shutdown();
  logger.info("virt-controller stopped");
  return exitCode;
}

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
