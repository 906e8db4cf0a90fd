#!/usr/bin/env node
/** virt-api: composition root. Admission webhooks and subresources (start, stop, restart, migrate, pause, console) for kubevirt.io/v1. */
import { readFileSync } from "node:fs";
import { CERTIFICATES } from "@kvt/api";
import { fileCaBundle, type TlsMaterialWatch, watchFiles, watchTlsMaterial } from "@kvt/certs";
import { loadKubeConfig, RestClient, watchConfigMapKey } from "@kvt/kube";
import type { Logger } from "@kvt/observability";
import { createLogger, createMetricsRegistry, setupTracing, startMetricsServer } from "@kvt/observability";
import { main } from "@kvt/runtime";
import pkg from "../package.json" with { type: "json" };
import {
  HANDLER_PORT,
  HANDLER_SERVER_NAME,
  type HandlerLocator,
  HttpHandlerClient,
  PodHandlerLocator,
  TemplateHandlerLocator,
} from "./handler/handler-client.ts";
import { RestClusterClient } from "./kube/cluster-client.ts";
import { RestKubeVirtConfigSource } from "./kube/kubevirt-config.ts";
import { VirtApiApp } from "./server/app.ts";
import { serviceAccountUser, VIRT_API_SERVICE_ACCOUNT } from "./server/identity.ts";
import { virtApiMetrics } from "./server/metrics.ts";
import { startVirtApiServer } from "./server/server.ts";
import { webhookRoutes } from "./webhooks/admitters.ts";
import { RestInstancetypeReader } from "./webhooks/instancetype-admitters.ts";
import { RestEvictionCluster } from "./webhooks/pod-eviction-admitter.ts";

await main({
  name: "virt-api",
  version: pkg.version,
  summary: "Admission webhooks and subresources (start, stop, restart, migrate, pause, console) for kubevirt.io/v1.",
  usage: "--tls-cert FILE --tls-key FILE [--port N] [--kubeconfig FILE] [--requestheader-client-ca FILE] [...]",
  details: [
    "  --tls-cert FILE                 serving certificate (PEM)",
    "  --tls-key FILE                  its private key (PEM)",
    "  --port N, --host H              HTTPS port (default 8443) and address (default the pod IP, env POD_IP, else",
    "                                  0.0.0.0: the API server reaches virt-api through its Service)",
    "  --kubeconfig FILE               API server credentials (default: in-cluster, else $KUBECONFIG/~/.kube/config)",
    "  --namespace NS                  KubeVirt's namespace (default kubevirt)",
    "  --requestheader-client-ca FILE  trust X-Remote-* identity only from clients this CA signed, and act as that user",
    "  --requestheader-allowed-names N comma-separated CNs allowed for that client certificate",
    "  --handler-url SPEC              virt-handler base URL: a template ({node} = VMI's node) or node=URL,node=URL",
    "                                  (default: the kubevirt.io=virt-handler pod on the VMI's node, pod IP, 8186)",
    "  --metrics-port N                /metrics, /healthz, /readyz on plain HTTP (read-only, no guest data; off when unset)",
    "  --metrics-host H                ... at H (default 127.0.0.1; the release passes the pod IP)",
    "  --handler-ca FILE               CA of virt-handler's serving certificate (default: ConfigMap <namespace>/",
    "                                  kubevirt-ca, key ca-bundle, followed live as KubeVirt's virt-api does)",
    "  --ca-configmap-name NAME        that ConfigMap's name (default kubevirt-ca)",
    "  --handler-client-cert FILE / --handler-client-key FILE   client certificate presented to virt-handler",
    "  --handler-server-name CN        CN required of virt-handler's certificate (default kubevirt.io:system:node:virt-handler)",
    "  --shutdown-delay-seconds N      on SIGTERM, keep serving N seconds (not ready, closing connections) before the",
    "                                  listener closes, so API server calls move to the other replicas (default 0)",
  ],
  flags: {
    kubeconfig: { type: "string" },
    port: { type: "string" },
    host: { type: "string" },
    "tls-cert": { type: "string" },
    "tls-key": { type: "string" },
    namespace: { type: "string" },
    "requestheader-client-ca": { type: "string" },
    "requestheader-allowed-names": { type: "string" },
    "handler-url": { type: "string" },
    "handler-ca": { type: "string" },
    "ca-configmap-name": { type: "string" },
    "handler-client-cert": { type: "string" },
    "handler-client-key": { type: "string" },
    "handler-server-name": { type: "string" },
    "metrics-port": { type: "string" },
    "metrics-host": { type: "string" },
    "shutdown-delay-seconds": { type: "string" },
  },
  async run({ values }, signal) {
    const logger = createLogger({ component: "virt-api" });
    const certFile = values["tls-cert"];
    const keyFile = values["tls-key"];
    if (!certFile || !keyFile) {
      process.stderr.write("virt-api: --tls-cert and --tls-key are required\n");
      return 2;
    }
    const shutdownDelay = seconds(values["shutdown-delay-seconds"]);
    if (shutdownDelay === undefined) {
      process.stderr.write(
        `virt-api: --shutdown-delay-seconds ${values["shutdown-delay-seconds"]}: expected a number of seconds from 0 to 300\n`,
      );
      return 2;
    }
    const tracing = setupTracing({ serviceName: "virt-api", serviceVersion: pkg.version });
    const kc = loadKubeConfig(values.kubeconfig ? { kubeconfig: values.kubeconfig } : {});
    const registry = createMetricsRegistry();
    // Writes for a caller impersonate it per request (RestClusterClient); 30 s: a webhook's whole budget is 10 s.
    const transport = new RestClient(kc, { registry, userAgent: `virt-api/${pkg.version}`, requestTimeoutMs: 30_000 });
    const namespace = values.namespace ?? "kubevirt";
    const self = new RestClusterClient(transport);
    const instancetypes = new RestInstancetypeReader(transport);
    const read = (f: string | undefined): string | undefined => (f ? readFileSync(f, "utf8") : undefined);
    const locator = values["handler-url"]
      ? new TemplateHandlerLocator(values["handler-url"])
      : new PodHandlerLocator(self, namespace, HANDLER_PORT);
    const { handler, handlerTls } = await handlerClient(values, locator, transport, namespace, logger, signal);
    const clientCa = read(values["requestheader-client-ca"]);
    const metrics = virtApiMetrics(registry);
    const app = new VirtApiApp({
      logger,
      clientFor: (user) => (user ? new RestClusterClient(transport, user) : self),
      internalClient: new RestClusterClient(transport, serviceAccountUser(namespace, VIRT_API_SERVICE_ACCOUNT)),
      handler,
      webhooks: webhookRoutes(
        self,
        namespace,
        instancetypes,
        new RestEvictionCluster(transport, self, namespace),
        new RestKubeVirtConfigSource(transport, namespace),
      ),
      instancetypes,
      requestHeaderAuth: clientCa
        ? { allowedNames: (values["requestheader-allowed-names"] ?? "").split(",").filter((s) => s.length > 0) }
        : undefined,
      version: pkg.version,
      consoleSessions: metrics,
      portForwardTunnels: metrics.portForwardTunnels,
      requests: metrics,
    });
    if (!clientCa) logger.warn("no --requestheader-client-ca: subresource writes act as virt-api's own identity");
    const server = await startVirtApiServer(app, {
      certPem: readFileSync(certFile, "utf8"),
      keyPem: readFileSync(keyFile, "utf8"),
      clientCaPem: clientCa,
      port: Number(values.port ?? "8443"),
      host: values.host ?? process.env.POD_IP ?? "0.0.0.0",
    });
    // A renewed kubevirt-virt-api-certs (virt-controller's certificate manager) is served without a restart.
    const reloadServing = watchFiles([certFile, keyFile], ([cert = "", key = ""]) => {
      try {
        server.updateCertificate(cert, key);
        logger.info("reloaded the serving certificate");
      } catch (error) {
        logger.warn({ err: error }, "cannot use the renewed serving certificate yet; keeping the current one");
      }
    });
    metrics.setReady(true);
    const ops = values["metrics-port"]
      ? await startMetricsServer({
          registry,
          port: Number(values["metrics-port"]),
          host: values["metrics-host"] ?? "127.0.0.1",
        })
      : undefined;
    logger.info({ port: server.port, metricsPort: ops?.port }, "virt-api serving");
    await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
    metrics.setReady(false);
    logger.info({ delaySeconds: shutdownDelay }, "stopping: draining connections");
    await server.close({ delayMs: shutdownDelay * 1000 });
    handlerTls?.stop();
    reloadServing.stop();
    await ops?.close();
    await tracing.shutdown();
    logger.info("virt-api stopped");
    return 0;
  },
});

/** A `--shutdown-delay-seconds` value (absent: 0), or undefined when it is not a number of seconds from 0 to 300. */
function seconds(value: string | undefined): number | undefined {
  const n = Number(value ?? "0");
  return Number.isFinite(n) && n >= 0 && n <= 300 ? n : undefined;
}

/** The client for the handlers, with its TLS material followed live (see {@link watchHandlerTls}). */
async function handlerClient(
  values: Record<string, string | undefined>,
  locator: HandlerLocator,
  transport: RestClient,
  namespace: string,
  logger: Logger,
  signal: AbortSignal,
): Promise<{ handler: HttpHandlerClient; handlerTls: TlsMaterialWatch | undefined }> {
  const serverName = values["handler-server-name"] ?? HANDLER_SERVER_NAME;
  const handlerTls = await watchHandlerTls(values, transport, namespace, logger, signal);
  const handler = new HttpHandlerClient(locator, { ...handlerTls?.initial, serverName });
  // A renewed kubevirt-virt-handler-certs or a rotated CA bundle is taken without a restart.
  handlerTls?.follow((material) => {
    handler.updateTls({ ...material, serverName });
    logger.info("reloaded the CA bundle and client certificate for virt-handler");
  });
  return { handler, handlerTls };
}

/**
 * virt-api's client certificate for the handlers (the files of Secret kubevirt-virt-handler-certs) and the CA bundle
 * their certificates are checked against: ConfigMap kubevirt-ca, followed through a watch as KubeVirt's virt-api
 * does (a rotated CA is trusted at once), or --handler-ca's file. Undefined without a client certificate.
 */
async function watchHandlerTls(
  values: Record<string, string | undefined>,
  transport: RestClient,
  namespace: string,
  logger: Logger,
  signal: AbortSignal,
): Promise<TlsMaterialWatch | undefined> {
  const [certFile, keyFile] = [values["handler-client-cert"], values["handler-client-key"]];
  if (!certFile || !keyFile) return undefined;
  const caFile = values["handler-ca"];
  const ca = caFile
    ? fileCaBundle(caFile)
    : watchConfigMapKey({
        transport,
        namespace,
        name: values["ca-configmap-name"] ?? CERTIFICATES.caConfigMap,
        key: CERTIFICATES.caBundleKey,
        logger,
      });
  return await watchTlsMaterial({
    certFile,
    keyFile,
    ca,
    signal,
    onRefused: (err) => logger.warn({ err }, "cannot use the rotated handler TLS material yet"),
  });
}
