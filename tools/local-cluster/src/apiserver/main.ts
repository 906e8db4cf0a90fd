/**
 * `npm run apiserver -- --data-dir DIR --kubeconfig FILE [--port N]`: runs the embedded API server alone in the
 * foreground, writes the kubeconfig once it is ready, and stops cleanly (every write committed) on SIGINT/SIGTERM.
 */
import { readFileSync } from "node:fs";
import { createLogger, DroppingDestination } from "@kvt/observability";
import { main } from "@kvt/runtime";
import { startApiServer } from "./apiserver.ts";

await main({
  name: "kvt-apiserver",
  version: "0.1.0",
  summary: "an embedded Kubernetes-compatible API server (node:sqlite storage) for the local cluster",
  usage:
    "--data-dir DIR --kubeconfig FILE [--port N] [--log-level LEVEL] [--storage-dir DIR] [--proxy-client-cert FILE --proxy-client-key FILE] [--token-auth-file FILE] [--service-cluster-ip-range CIDR] [--authorization-audit-log FILE]",
  flags: {
    "data-dir": { type: "string" },
    kubeconfig: { type: "string" },
    port: { type: "string" },
    "log-level": { type: "string" },
    "storage-dir": { type: "string" },
    "proxy-client-cert": { type: "string" },
    "proxy-client-key": { type: "string" },
    "token-auth-file": { type: "string" },
    "service-cluster-ip-range": { type: "string" },
    "kubelet-client-certificate": { type: "string" },
    "kubelet-client-key": { type: "string" },
    "kubelet-certificate-authority": { type: "string" },
    "authorization-audit-log": { type: "string" },
  },
  details: [
    "  --data-dir DIR      where the SQLite state lives (created if missing)",
    "  --kubeconfig FILE   where to write the kubeconfig (default DIR/kubeconfig)",
    "  --port N            TCP port on 127.0.0.1 (default 0: a free port)",
    "  --log-level LEVEL   trace|debug|info|warn|error (default info)",
    "  --storage-dir DIR   the local-path provisioner's volume directories (and the default StorageClass local-path)",
    "  --proxy-client-cert FILE, --proxy-client-key FILE",
    "                      front-proxy client certificate (PEM) presented to aggregated API servers (APIServices)",
    '  --token-auth-file FILE  static bearer tokens, one `token,user,uid,"group1,group2"` line each',
    "  --kubelet-client-certificate FILE, --kubelet-client-key FILE",
    "                      client certificate (PEM) presented to kubelets (pods/log), as kube-apiserver's",
    "  --kubelet-certificate-authority FILE  CA of the kubelets' serving certificates (unset: not verified)",
    "  --service-cluster-ip-range CIDR  the IPv4 range Services' ClusterIPs come from (default 10.96.0.0/12)",
    "  --authorization-audit-log FILE   append each distinct authorization decision, with the RBAC rules that",
    "                      allowed it, as a JSON line (auth/authorization-audit.ts; default: no audit)",
  ],
  async run({ values }, signal) {
    const dataDir = values["data-dir"];
    if (!dataDir) {
      process.stderr.write("kvt-apiserver: --data-dir is required\n");
      return 2;
    }
    const port = values.port === undefined ? 0 : Number(values.port);
    if (!Number.isInteger(port) || port < 0 || port > 65535) {
      process.stderr.write(`kvt-apiserver: invalid --port ${values.port ?? ""}\n`);
      return 2;
    }
    const level = (values["log-level"] ?? "info") as "info";
    // A log destination that cannot write (stdout on a full disk, a closed pipe) drops lines; it never takes the
    // server down nor keeps it from stopping. The first failure after a success is reported on stderr.
    const destination = new DroppingDestination(1, {
      onError: (err) =>
        process.stderr.write(`kvt-apiserver: cannot write log output, dropping lines: ${err.message}\n`),
    });
    const logger = createLogger({ component: "kvt-apiserver", level, destination });
    for (const stream of [process.stdout, process.stderr])
      stream.on("error", () => {
        // Same rule for the plain stdout/stderr lines: an unwritable stream is not a reason to stop serving.
      });
    const certFile = values["proxy-client-cert"];
    const keyFile = values["proxy-client-key"];
    if ((certFile === undefined) !== (keyFile === undefined)) {
      process.stderr.write("kvt-apiserver: give both --proxy-client-cert and --proxy-client-key, or neither\n");
      return 2;
    }
    const proxyClient =
      certFile && keyFile
        ? { certPem: readFileSync(certFile, "utf8"), keyPem: readFileSync(keyFile, "utf8") }
        : undefined;
    const kubeletCert = values["kubelet-client-certificate"];
    const kubeletKey = values["kubelet-client-key"];
    if ((kubeletCert === undefined) !== (kubeletKey === undefined)) {
      process.stderr.write(
        "kvt-apiserver: give both --kubelet-client-certificate and --kubelet-client-key, or neither\n",
      );
      return 2;
    }
    const kubeletCa = values["kubelet-certificate-authority"];
    const kubeletClient =
      kubeletCert && kubeletKey
        ? {
            certPem: readFileSync(kubeletCert, "utf8"),
            keyPem: readFileSync(kubeletKey, "utf8"),
            ...(kubeletCa ? { caPem: readFileSync(kubeletCa, "utf8") } : {}),
          }
        : undefined;
    const server = await startApiServer({
      dataDir,
      port,
      kubeconfigPath: values.kubeconfig,
      logger,
      proxyClient,
      kubeletClient,
      storageDir: values["storage-dir"],
      tokenAuthFile: values["token-auth-file"],
      serviceClusterIpRange: values["service-cluster-ip-range"],
      authorizationAuditLog: values["authorization-audit-log"],
    });
    process.stdout.write(`kvt-apiserver listening on ${server.url}; kubeconfig: ${server.kubeconfigPath}\n`);
    await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
    await server.stop();
    logger.info("API server stopped");
    destination.flushSync();
    return 0;
  },
});
