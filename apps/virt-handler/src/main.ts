#!/usr/bin/env node
import { CERTIFICATES } from "@kvt/api";
import { fileCaBundle, watchTlsMaterial } from "@kvt/certs";
/**
 * virt-handler: composition root. Node agent: runs this node's VirtualMachineInstances through their launchers
 * and reports their status. One per node; launchers are found through the kubelet's pods directory (each launcher
 * pod's `sockets` emptyDir, as KubeVirt's handler finds them), and virt-api reaches this process on --port
 * (KubeVirt's 8186).
 * Exit codes: 0 stopped by a signal, 2 bad arguments, 3 could not start.
 */
import { DEFAULT_DEVICE_PLUGINS_DIR } from "@kvt/device-plugin";
import { loadKubeConfig, RestClient, watchConfigMapKey } from "@kvt/kube";
import { createLogger, createMetricsRegistry, setupTracing } from "@kvt/observability";
import type { ConntrackDeleter } from "@kvt/pod-network";
import { main } from "@kvt/runtime";
import pkg from "../package.json" with { type: "json" };
import { DEFAULT_MAX_DEVICES } from "./device-manager/device-controller.ts";
import { startHandlerApp } from "./handler-app.ts";
import { startMetricsServer } from "./http/metrics-server.ts";
import { nodeConntrackDeleter } from "./network/migrated-flows.ts";

/**
 * Where the kubelet's pods directory is mounted (KubeVirt's cmd-client podsBaseDir and the DaemonSet's
 * `kubelet-pods-shortened` mount of /var/lib/kubelet/pods): /var/lib/kubelet/pods itself would make launcher socket
 * paths 112 bytes long, over the 107 a unix socket path may have.
 */
const DEFAULT_KUBELET_PODS_DIR = "/pods";

await main({
  name: "virt-handler",
  version: pkg.version,
  summary: "Node agent: runs this node's VirtualMachineInstances through their launchers and reports their status.",
  usage: "--node-name NAME --tls-cert FILE --tls-key FILE [--client-ca FILE] [--kubeconfig FILE] [--port 8186] [...]",
  flags: {
    "node-name": { type: "string" },
    kubeconfig: { type: "string" },
    "kubelet-pods-dir": { type: "string" },
    "socket-dir": { type: "string" },
    port: { type: "string" },
    "metrics-port": { type: "string" },
    "metrics-host": { type: "string" },
    host: { type: "string" },
    "tls-cert": { type: "string" },
    "tls-key": { type: "string" },
    "client-ca": { type: "string" },
    "ca-configmap-name": { type: "string" },
    "log-level": { type: "string" },
    "device-plugins-dir": { type: "string" },
    "max-devices": { type: "string" },
    "wire-pod-network": { type: "boolean" },
    "clear-migrated-flows": { type: "boolean" },
    "node-netns": { type: "string" },
  },
  details: [
    "  --node-name NAME      this node (env NODE_NAME)",
    "  --kubeconfig FILE     the cluster (else KUBECONFIG, ~/.kube/config, or in-cluster)",
    "  --kubelet-pods-dir DIR  the kubelet's pods directory as mounted here (default /pods: KubeVirt mounts the",
    "                        host's /var/lib/kubelet/pods there, a short path, as a unix socket path ends at 107",
    "                        bytes); each launcher listens at <DIR>/<pod uid>/volumes/kubernetes.io~empty-dir/",
    "                        sockets/launcher-sock",
    "  --socket-dir DIRS     directories of launchers run by hand (launcher-<key>.sock), comma-separated",
    "  --port N, --host H    the server virt-api and the other handlers call (default 8186 on the pod IP, env",
    "                        POD_IP, else 127.0.0.1; 0 = any free port); H:N is published to a migration's",
    "                        source handler, which fetches the migration secret there",
    "  --tls-cert/--tls-key  its serving certificate (PEM; KubeVirt's kubevirt-virt-handler-server-certs), also its",
    "                        client certificate towards the other handlers (issued for both uses)",
    "  --client-ca FILE      CA of the clients accepted: virt-api's certificate (kubevirt-virt-handler-certs) and the",
    "                        other handlers';",
    "                        default: ConfigMap <POD_NAMESPACE or kubevirt>/kubevirt-ca, followed live (KubeVirt's)",
    "  --ca-configmap-name N that ConfigMap's name (default kubevirt-ca)",
    "  --metrics-port N      serve /metrics and /healthz (read-only, no guest data) on N (default 8185; 0 = any)",
    "  --metrics-host H      ... at H (default 127.0.0.1; the release passes the pod IP for probes and Prometheus)",
    "  --device-plugins-dir DIR  the kubelet's device plugins directory: kubelet.sock is there, and the plugins for",
    "                        devices.kubevirt.io/kvm, tun and vhost-net serve there (default /var/lib/kubelet/device-plugins)",
    "  --max-devices N       slots each device plugin advertises (default 1000)",
    "  --wire-pod-network    plumb each launcher pod's network (bridge, tap, NAT) from here, entering the pod's",
    "                        namespace through /proc/<launcher pid>/ns/net (needs hostPID and privileges, as",
    "                        KubeVirt's handler); launchers without CAP_NET_ADMIN then only serve DHCP",
    "  --clear-migrated-flows  after a live migration moved a VMI's pod address, delete the node's conntrack",
    "                        entries of flows to the old address (beyond KubeVirt: kube-proxy deletes only UDP ones),",
    "                        so a client's connection through a Service follows the VM; needs conntrack, nsenter,",
    "                        hostPID and privileges",
    "  --node-netns FILE     the node's network namespace for --clear-migrated-flows (default: the parent process's,",
    "                        /proc/<ppid>/ns/net: the container runtime's shim runs in the node's namespace)",
  ],
  async run({ values }, signal) {
    const nodeName = values["node-name"] ?? process.env.NODE_NAME;
    if (!nodeName) {
      process.stderr.write("virt-handler: --node-name (or NODE_NAME) is required\n");
      return 2;
    }
    const numbers = numericFlags(values);
    if (typeof numbers === "string") {
      process.stderr.write(`virt-handler: ${numbers}\n`);
      return 2;
    }
    const { port, maxDevices } = numbers;
    const [certFile, keyFile] = [values["tls-cert"], values["tls-key"]];
    if (!certFile || !keyFile) {
      // Console and pause reach guests: there is no plain-HTTP mode to fall back to.
      process.stderr.write("virt-handler: --tls-cert and --tls-key are required\n");
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
      const kubeConfig = loadKubeConfig(values.kubeconfig ? { kubeconfig: values.kubeconfig } : {});
      // Serving pair from the Secret's files; the client CA from ConfigMap kubevirt-ca, followed through a watch as
      // KubeVirt's handler does (a rotated CA is trusted at once), or from --client-ca's file.
      const caFile = values["client-ca"];
      const ca = caFile
        ? fileCaBundle(caFile)
        : watchConfigMapKey({
            transport: new RestClient(kubeConfig, { userAgent: `virt-handler/${pkg.version} ca-bundle` }),
            namespace: process.env.POD_NAMESPACE ?? "kubevirt",
            name: values["ca-configmap-name"] ?? CERTIFICATES.caConfigMap,
            key: CERTIFICATES.caBundleKey,
            logger,
          });
      const tls = await watchTlsMaterial({
        certFile,
        keyFile,
        ca,
        signal,
        onRefused: (err) => logger.warn({ err }, "cannot use the rotated TLS material yet; keeping the current one"),
      });
      const socketDirs = (values["socket-dir"] ?? "").split(",").filter((d) => d.length > 0);
      const podsDir = values["kubelet-pods-dir"] ?? DEFAULT_KUBELET_PODS_DIR;
      const registry = createMetricsRegistry();
      const metrics = await startMetricsServer(
        registry,
        Number(values["metrics-port"] ?? 8185),
        values["metrics-host"] ?? "127.0.0.1",
      );
      logger.info({ port: metrics.port }, "serving /metrics");
      const app = await startHandlerApp({
        nodeName,
        kubeConfig,
        podsDir,
        socketDirs,
        logger,
        registry,
        port,
        host: values.host ?? process.env.POD_IP ?? "127.0.0.1",
        tls: tls.initial,
        devicePluginsDir: values["device-plugins-dir"] ?? DEFAULT_DEVICE_PLUGINS_DIR,
        maxDevices,
        wirePodNetwork: values["wire-pod-network"] === true,
        ...migratedFlowsOption(values),
      });
      // A renewed kubevirt-virt-handler-server-certs or a rotated CA bundle is taken without a restart.
      tls.follow((material) => app.updateTls(material));
      await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
      tls.stop();
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

/** --clear-migrated-flows: the deleter in --node-netns (default the parent's, the runtime shim's: the node's). */
function migratedFlowsOption(values: { "clear-migrated-flows"?: boolean; "node-netns"?: string }): {
  clearMigratedFlows?: ConntrackDeleter;
} {
  if (values["clear-migrated-flows"] !== true) return {};
  return { clearMigratedFlows: nodeConntrackDeleter(values["node-netns"] ?? `/proc/${process.ppid}/ns/net`) };
}

/** --port and --max-devices, or what is wrong with them. */
function numericFlags(values: {
  port?: string;
  "max-devices"?: string;
}): { port: number; maxDevices: number } | string {
  const port = Number(values.port ?? 8186);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) return `--port ${values.port ?? ""} is not a port`;
  const maxDevices = Number(values["max-devices"] ?? DEFAULT_MAX_DEVICES);
  if (!Number.isInteger(maxDevices) || maxDevices < 1)
    return `--max-devices ${values["max-devices"] ?? ""} is not a positive integer`;
  return { port, maxDevices };
}
