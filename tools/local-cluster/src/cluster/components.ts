/**
 * The processes of the local cluster and their command lines (pure). The order is the start order; the supervisor
 * stops them in reverse.
 *
 *   apiserver -> scheduler -> process-kubelet per node -> service-proxy (with a pod network) -> virt-controller
 *     -> virt-api -> virt-handler per node
 *
 * virt-controller comes first among KubeVirt's: its certificate manager makes the Secrets virt-api and virt-handler
 * read their certificates from (component-volumes.ts writes them as files, as a kubelet's volumes).
 *
 * Every component gets its own identity's kubeconfig (component-identities.ts: none runs as the admin), its own
 * metrics port (recorded for the Prometheus scrape config) and the tracing environment (KUBEVIRT_TRACES_FILE when
 * the cluster records traces).
 */
import { join } from "node:path";
import { APISERVER_NODE_FLAGS } from "../apiserver/node-flags.ts";
import { podsLinkPath } from "../kubelet/pods-link.ts";
import { componentKubeconfig, tokenAuthFile } from "./component-identities.ts";
import type { ComponentTlsFiles } from "./component-volumes.ts";
import { type RuntimeName, runtimeFlags, runtimeNameOf, SMALL_PROCESS_NODE_FLAGS } from "./js-runtime.ts";
import { apiserverKubeletFlags, type KubeletTlsFiles, kubeletServerFlags } from "./pki.ts";

/** Where things are and which ports were assigned. */
export interface ClusterLayout {
  readonly projectRoot: string;
  readonly dataDir: string;
  readonly kubeconfig: string;
  /** Runtime executable and its arguments before an entry point (Node: none; Deno: run -A). */
  readonly execPath: string;
  readonly execArgs: readonly string[];
  /** Which runtime `execPath` is (node flags are mapped for Deno); default by its file name. */
  readonly runtime?: RuntimeName;
  readonly apiPort: number;
  readonly nodeNames: readonly string[];
  /** Metrics port per component name (`virt-handler/node01` ...). */
  readonly metricsPorts: Readonly<Record<string, number>>;
  readonly virtApiPort: number;
  /** virt-handler's HTTP port (console, pause) per node. */
  readonly handlerPorts: Readonly<Record<string, number>>;
  /**
   * KubeVirt's certificates as the components read them: virt-api's serving and client certificates and
   * virt-handler's serving certificate (virt-controller's Secrets, written as files by component-volumes.ts).
   */
  readonly componentTls: ComponentTlsFiles;
  /**
   * Front-proxy PKI for API aggregation: the API server presents `clientCert`/`clientKey` to virt-api, which trusts
   * the caller's X-Remote-* identity from certificates `ca` signed (CN `front-proxy-client`).
   */
  readonly frontProxy?: { readonly ca: string; readonly clientCert: string; readonly clientKey: string };
  /** The process-kubelets' serving certificates and the API server's kubelet client certificate (pki.ts). */
  readonly kubeletTls?: KubeletTlsFiles;
  readonly tracesFile?: string;
  /** CPUs each node advertises (kubelet --cpus); default the machine's. */
  readonly nodeCpus?: number;
  /** The pod network's plan file (kubelet --pod-network); none: pods share the host's network. */
  readonly podNetworkFile?: string;
  /** The Services' ClusterIP range (the API server's --service-cluster-ip-range; default its own). */
  readonly serviceCidr?: string;
  /** Bundled entry modules by source entry relative to projectRoot (component-images.ts); others run from source. */
  readonly componentEntries?: Readonly<Record<string, string>>;
  /** The API server's authorization audit file (its --authorization-audit-log); none: no audit. */
  readonly authorizationAuditLog?: string;
}

/** Where a component's entry point `rel` (relative to the project root) runs from: its bundle, else its source. */
function entryModule(layout: ClusterLayout, rel: string): string {
  return layout.componentEntries?.[rel] ?? join(layout.projectRoot, rel);
}

/** One process to run. */
export interface ComponentCommand {
  readonly name: string;
  /** Prometheus job name (`virt-handler` for every node's handler). */
  readonly job: string;
  readonly argv: string[];
  readonly env: Record<string, string>;
  readonly metricsPort?: number;
}

/** A node's device plugins directory: its kubelet's kubelet.sock and its virt-handler's plugin sockets. */
export function devicePluginsDir(layout: Pick<ClusterLayout, "dataDir">, node: string): string {
  return join(layout.dataDir, "nodes", node, "device-plugins");
}

/** The node names the cluster uses (as kubevirtci names its nodes). */
export function nodeNames(count: number): string[] {
  return Array.from({ length: count }, (_, i) => `node${String(i + 1).padStart(2, "0")}`);
}

/** Every component's command line for `layout`. */
export function clusterComponents(layout: ClusterLayout): ComponentCommand[] {
  const flags = runtimeFlags(layout.runtime ?? runtimeNameOf(layout.execPath), SMALL_PROCESS_NODE_FLAGS);
  const entry = (path: string): string[] => [layout.execPath, ...layout.execArgs, ...flags, entryModule(layout, path)];
  const env: Record<string, string> = {
    // One malloc arena: these processes run few threads that allocate, and every extra arena keeps its own pages.
    MALLOC_ARENA_MAX: "1",
    ...(layout.tracesFile ? { KUBEVIRT_TRACES_FILE: layout.tracesFile } : {}),
  };
  /** Each runs as its own identity: KubeVirt's service accounts, the scheduler's and each node's. */
  const accountKc = (file: string): string[] => ["--kubeconfig", componentKubeconfig(layout.kubeconfig, file)];
  const port = (name: string): number => layout.metricsPorts[name] ?? 0;
  const out: ComponentCommand[] = [
    apiserverComponent(layout, env),
    {
      name: "scheduler",
      job: "scheduler",
      argv: [...entry("tools/local-cluster/src/scheduler/main.ts"), ...accountKc("scheduler")],
      env,
    },
  ];
  for (const node of layout.nodeNames) {
    out.push({
      name: `kubelet/${node}`,
      job: "kubelet",
      argv: [
        ...entry("tools/local-cluster/src/kubelet/main.ts"),
        "--node-name",
        node,
        ...accountKc(`node-${node}`),
        "--data-dir",
        join(layout.dataDir, "nodes", node),
        "--device-plugins-dir",
        devicePluginsDir(layout, node),
        ...(layout.nodeCpus ? ["--cpus", String(layout.nodeCpus)] : []),
        ...(layout.kubeletTls ? kubeletServerFlags(layout.kubeletTls, node) : []),
        ...(layout.podNetworkFile ? ["--pod-network", layout.podNetworkFile] : []),
      ],
      env,
    });
  }
  out.push(...serviceProxyComponent(layout, entry("tools/local-cluster/src/proxy/main.ts"), env));
  out.push({
    name: "virt-controller",
    job: "virt-controller",
    argv: [
      ...entry("apps/virt-controller/src/main.ts"),
      ...accountKc("kubevirt-controller"),
      "--metrics-port",
      String(port("virt-controller")),
    ],
    env,
    metricsPort: port("virt-controller"),
  });
  out.push({
    name: "virt-api",
    job: "virt-api",
    argv: [
      ...entry("apps/virt-api/src/main.ts"),
      ...accountKc("kubevirt-apiserver"),
      "--port",
      String(layout.virtApiPort),
      "--host",
      "127.0.0.1",
      "--tls-cert",
      layout.componentTls.virtApi.cert,
      "--tls-key",
      layout.componentTls.virtApi.key,
      "--metrics-port",
      String(port("virt-api")),
      // The client certificate virt-handler accepts (deploy/'s mount, as files here); the CA bundle to check the
      // handlers by is ConfigMap kubevirt-ca, which virt-api watches.
      "--handler-client-cert",
      layout.componentTls.handlerClient.cert,
      "--handler-client-key",
      layout.componentTls.handlerClient.key,
      "--handler-url",
      layout.nodeNames.map((n) => `${n}=https://127.0.0.1:${layout.handlerPorts[n]}`).join(","),
      ...(layout.frontProxy
        ? ["--requestheader-client-ca", layout.frontProxy.ca, "--requestheader-allowed-names", "front-proxy-client"]
        : []),
    ],
    env,
    metricsPort: port("virt-api"),
  });
  for (const node of layout.nodeNames) {
    const name = `virt-handler/${node}`;
    out.push({
      name,
      job: "virt-handler",
      argv: [
        ...entry("apps/virt-handler/src/main.ts"),
        "--node-name",
        node,
        ...accountKc("kubevirt-handler"),
        // Its node's kubelet pods directory, through the kubelet's short link (as KubeVirt's /pods mount).
        "--kubelet-pods-dir",
        podsLinkPath(join(layout.dataDir, "nodes", node)),
        // Its device plugins register with this node's kubelet, as with /var/lib/kubelet/device-plugins.
        "--device-plugins-dir",
        devicePluginsDir(layout, node),
        "--port",
        String(layout.handlerPorts[node]),
        "--metrics-port",
        String(port(name)),
        // Mutual TLS on 127.0.0.1 (the local cluster's nodes share this host's loopback).
        "--host",
        "127.0.0.1",
        "--tls-cert",
        layout.componentTls.handlerServer.cert,
        "--tls-key",
        layout.componentTls.handlerServer.key,
        // With the pod network, as on a real node: the flows a live migration left pinned to the source pod's
        // address are the handler's to delete (the service proxy, as kube-proxy, deletes UDP ones only). Every
        // simulated node's Services are routed in this host's namespace, the handler's own.
        ...(layout.podNetworkFile ? ["--clear-migrated-flows", "--node-netns", "/proc/self/ns/net"] : []),
      ],
      env,
      metricsPort: port(name),
    });
  }
  return out;
}

/** The embedded API server's command line. */
function apiserverComponent(layout: ClusterLayout, env: Record<string, string>): ComponentCommand {
  return {
    name: "apiserver",
    job: "apiserver",
    argv: [
      layout.execPath,
      ...layout.execArgs,
      ...runtimeFlags(layout.runtime ?? runtimeNameOf(layout.execPath), APISERVER_NODE_FLAGS),
      entryModule(layout, "tools/local-cluster/src/apiserver/main.ts"),
      "--data-dir",
      join(layout.dataDir, "apiserver"),
      "--kubeconfig",
      layout.kubeconfig,
      "--port",
      String(layout.apiPort),
      "--storage-dir",
      join(layout.dataDir, "storage"),
      "--token-auth-file",
      tokenAuthFile(layout.dataDir),
      ...(layout.kubeletTls ? apiserverKubeletFlags(layout.kubeletTls) : []),
      ...(layout.frontProxy
        ? ["--proxy-client-cert", layout.frontProxy.clientCert, "--proxy-client-key", layout.frontProxy.clientKey]
        : []),
      ...(layout.serviceCidr ? ["--service-cluster-ip-range", layout.serviceCidr] : []),
      ...(layout.authorizationAuditLog ? ["--authorization-audit-log", layout.authorizationAuditLog] : []),
    ],
    env,
  };
}

/** The service proxy (kube-proxy's job) of a cluster with a pod network and a service range, as system:kube-proxy. */
function serviceProxyComponent(
  layout: ClusterLayout,
  entry: string[],
  env: Record<string, string>,
): ComponentCommand[] {
  if (!layout.podNetworkFile || !layout.serviceCidr) return [];
  return [
    {
      name: "service-proxy",
      job: "service-proxy",
      argv: [
        ...entry,
        "--kubeconfig",
        componentKubeconfig(layout.kubeconfig, "kube-proxy"),
        "--pod-network",
        layout.podNetworkFile,
      ],
      env,
    },
  ];
}

/** A Prometheus scrape configuration for every component that serves /metrics. */
export function prometheusScrapeConfig(components: readonly ComponentCommand[]): string {
  const jobs = new Map<string, { target: string; instance: string }[]>();
  for (const c of components) {
    if (!c.metricsPort) continue;
    jobs.set(c.job, [...(jobs.get(c.job) ?? []), { target: `127.0.0.1:${c.metricsPort}`, instance: c.name }]);
  }
  const lines = [
    "# Written by `npm start`: scrapes every component of the local cluster.",
    "global:",
    "  scrape_interval: 5s",
    "scrape_configs:",
  ];
  for (const [job, targets] of jobs) {
    lines.push(`  - job_name: ${job}`, "    static_configs:");
    for (const t of targets) {
      lines.push(`      - targets: ["${t.target}"]`, `        labels: { component: "${t.instance}" }`);
    }
  }
  return `${lines.join("\n")}\n`;
}
