/**
 * Brings the local cluster up on this machine and down again: the API server, the scheduler, a process-kubelet per
 * node, virt-api, virt-controller and a virt-handler per node, each as its own supervised process, with the CRDs
 * installed and the admission webhooks and subresource APIService registered. `npm start` and the e2e tests use it.
 *
 * State lives under `dataDir` and survives restarts: the API server's database, the kubeconfig, the ports and the
 * cluster's own certificates (cluster.json, pki/), and one log file per component under logs/. KubeVirt's
 * certificates are virt-controller's, in Secrets; volumes/ holds them as the components read them.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import {
  API_VERSION,
  CERTIFICATES,
  commonInstancetypes,
  customResourceDefinitions,
  instancetypeResourceType,
  KIND,
  KUBEVIRT_CR,
} from "@kvt/api";
import {
  CORE_V1,
  KUBEVIRT_V1,
  type KubeAccess,
  type KubeObject,
  kubeConfigFromFile,
  type Node,
  RestClient,
  type RestTransport,
  resourceClient,
} from "@kvt/kube";
import { freePort } from "@kvt/runtime";
import { pino } from "pino";
import {
  createPodNetwork,
  type PodNetworkConfig,
  podNetworkFile,
  removePodNetwork,
} from "../network/cluster-network.ts";
import {
  componentIdentities,
  ensureComponentTokens,
  tokenAuthFile,
  writeComponentKubeconfigs,
} from "./component-identities.ts";
import { buildComponentImages } from "./component-images.ts";
import { type ComponentTlsFiles, ComponentVolumes, componentTlsFiles } from "./component-volumes.ts";
import { type ClusterLayout, clusterComponents, nodeNames, prometheusScrapeConfig } from "./components.ts";
import { createOrReplace, createOrReplaceAll } from "./create-or-replace.ts";
import { currentRuntimeName, jsRuntime, type RuntimeName, runtimeNameOf } from "./js-runtime.ts";
import { ensureKubeletCerts, handlerServes } from "./pki.ts";
import { applyReleaseRbac } from "./release-rbac.ts";
import { Supervisor, type SupervisorEvent } from "./supervisor.ts";
import { ensureFrontProxyTls, registerVirtApi } from "./virt-api-wiring.ts";
import { waitFor } from "./wait.ts";

/** Options for {@link startLocalCluster}. */
export interface LocalClusterOptions {
  readonly projectRoot: string;
  readonly dataDir: string;
  /** Number of nodes; default 2. */
  readonly nodes?: number;
  /**
   * CPUs each node advertises; default the machine's. Launcher pods request 100m each, so a node of this machine's
   * 2 CPUs takes about 19 of them: density runs need more.
   */
  readonly nodeCpus?: number;
  /** Record every component's spans to this file (OTLP/JSON lines). */
  readonly tracesFile?: string;
  /** Progress lines for the user. */
  readonly progress: (message: string) => void;
  /** Registers the webhooks and APIService routing to virt-api; default {@link registerVirtApi}. */
  readonly registerVirtApi?: (transport: RestTransport, port: number) => Promise<void>;
  /**
   * The KubeVirt CR's `developerConfiguration.useEmulation` when the cluster creates it (first start of a data
   * directory; later starts keep what the CR says). Default true: a laptop without KVM still runs VMs, on QEMU.
   */
  readonly useEmulation?: boolean;
  /**
   * Run every component as on a host without /dev/kvm (bin/without-kvm.sh: a mount namespace whose /dev lacks the
   * kvm node), so the no-KVM path is tested on hosts that have one. Needs root or user namespaces.
   */
  readonly hideKvm?: boolean;
  /**
   * The runtime every process runs on: the components, and the launchers each kubelet starts (a kubelet starts them
   * on its own runtime). Default this process's runtime; `execPath`/`execArgs` override the executable (default: the project's).
   */
  readonly runtime?: RuntimeName;
  readonly execPath?: string;
  readonly execArgs?: readonly string[];
  /**
   * Give every pod its own network namespace on a bridge the cluster creates (network/cluster-network.ts, the real
   * CNI plugins). Default: when this process is root (it creates namespaces and links); else pods share the host's.
   */
  readonly podNetwork?: boolean;
  /**
   * Run the components from bundles built at start (component-images.ts; default true) rather than from their
   * TypeScript sources: less memory per process. A failed build falls back to the sources, with a progress line.
   */
  readonly bundleComponents?: boolean;
  /**
   * Have the API server append its authorization audit to this file (apiserver/auth/authorization-audit.ts; e2e
   * runs read it to prove each component's RBAC rule needed, cluster/rbac-usage.ts). Default: no audit.
   */
  readonly authorizationAuditLog?: string;
}

/** A running local cluster. */
export interface LocalCluster {
  readonly kubeconfig: string;
  /** Cluster access as the kubeconfig file gives it (for a @kvt/kube RestClient). */
  readonly kubeConfig: KubeAccess;
  readonly dataDir: string;
  readonly nodeNames: readonly string[];
  readonly scrapeConfigPath: string;
  readonly supervisor: Supervisor;
  /** Stops every component (last started first). */
  stop(): Promise<void>;
}

interface PersistedState {
  apiPort: number;
  virtApiPort: number;
  metricsPorts: Record<string, number>;
  handlerPorts: Record<string, number>;
}

async function loadState(file: string, nodes: readonly string[]): Promise<PersistedState> {
  const state: PersistedState = existsSync(file)
    ? (JSON.parse(readFileSync(file, "utf8")) as PersistedState)
    : { apiPort: await freePort(), virtApiPort: await freePort(), metricsPorts: {}, handlerPorts: {} };
  state.handlerPorts ??= {};
  for (const n of nodes) state.handlerPorts[n] ??= await freePort();
  for (const name of ["virt-api", "virt-controller", ...nodes.map((n) => `virt-handler/${n}`)]) {
    state.metricsPorts[name] ??= await freePort();
  }
  writeFileSync(file, `${JSON.stringify(state, null, 2)}\n`);
  return state;
}

/** bin/without-kvm.sh: runs a command in a mount namespace whose /dev has no kvm node. */
export const WITHOUT_KVM_WRAPPER: string = new URL("../../bin/without-kvm.sh", import.meta.url).pathname;

/**
 * Creates the KubeVirt CR `kubevirt/kubevirt` (and its namespace) when missing, with `useEmulation` as given and the
 * pod network's default binding set to masquerade (as HyperConverged installs set it; KubeVirt's own default, bridge,
 * leaves a VMI without interfaces unable to migrate). An existing CR is left as it is: the admin's edits survive.
 */
async function ensureKubeVirtCr(transport: RestTransport, useEmulation: boolean): Promise<void> {
  const keep = { replace: false };
  await createOrReplace(
    resourceClient(transport, CORE_V1.namespaces),
    { metadata: { name: KUBEVIRT_CR.namespace } },
    keep,
  );
  const body = {
    apiVersion: API_VERSION,
    kind: KIND.KubeVirt,
    metadata: { name: KUBEVIRT_CR.name, namespace: KUBEVIRT_CR.namespace },
    spec: {
      configuration: { developerConfiguration: { useEmulation }, network: { defaultNetworkInterface: "masquerade" } },
    },
  };
  await createOrReplace(resourceClient(transport, KUBEVIRT_V1.kubevirts), body, keep);
}

/** Creates or replaces the kubevirt.io CRDs. */
async function installCrds(transport: RestTransport): Promise<void> {
  await createOrReplaceAll(transport, customResourceDefinitions());
}

/**
 * Waits until the virt-controller leader has deployed the common-instancetypes bundle (as virt-operator does, once
 * virt-api's webhooks serve): a cluster is handed over with u1.medium and friends in place.
 */
async function waitForCommonInstancetypes(transport: RestTransport): Promise<void> {
  const bundle = commonInstancetypes();
  const kinds = [...new Set(bundle.map((o) => o.kind))];
  await waitFor(
    `virt-controller to deploy the ${bundle.length} common instancetypes and preferences`,
    async () => {
      for (const kind of kinds) {
        const names = new Set(
          (await resourceClient<KubeObject>(transport, instancetypeResourceType(kind)).list()).items.map(
            (o) => o.metadata?.name,
          ),
        );
        if (bundle.some((o) => o.kind === kind && !names.has(o.metadata.name))) return false;
      }
      return true;
    },
    START_TIMEOUT_MS,
    250,
  );
}

/** How long each start-up stage may take: generous, as a loaded shared machine starts Node processes slowly. */
const START_TIMEOUT_MS = 180_000;

function tcpOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

async function httpOk(url: string): Promise<boolean> {
  const r = await fetch(url, { signal: AbortSignal.timeout(2000) });
  await r.body?.cancel();
  return r.ok;
}

/**
 * Waits until the KubeVirt components serve, so the cluster is usable the moment start resolves: virt-api's
 * webhook port accepts connections (the API server calls it on every VMI write; before that, writes fail with
 * "failed calling webhook"), virt-controller has a leader, and each node's virt-handler answers /healthz.
 */
async function waitForComponents(
  state: PersistedState,
  nodes: readonly string[],
  tls: ComponentTlsFiles,
  transport: RestTransport,
  logDir: string,
): Promise<void> {
  await waitFor("virt-api to accept connections", () => tcpOpen(state.virtApiPort), START_TIMEOUT_MS, 200);
  const controller = state.metricsPorts["virt-controller"];
  await waitFor(
    "virt-controller to lead",
    () => httpOk(`http://127.0.0.1:${controller}/leader`),
    START_TIMEOUT_MS,
    200,
  );
  // The handlers' CA bundle, as virt-api reads it: ConfigMap kubevirt-ca.
  const caBundle = async (): Promise<string> => {
    const cm = await resourceClient<KubeObject & { data?: Record<string, string> }>(transport, CORE_V1.configMaps).get(
      KUBEVIRT_CR.namespace,
      CERTIFICATES.caConfigMap,
    );
    return cm.data?.[CERTIFICATES.caBundleKey] ?? "";
  };
  const client = { certFile: tls.handlerClient.cert, keyFile: tls.handlerClient.key };
  for (const n of nodes) {
    await waitFor(
      `virt-handler on ${n} to serve`,
      async () => handlerServes(state.handlerPorts[n] ?? 0, { caPem: await caBundle(), ...client }),
      START_TIMEOUT_MS,
      200,
    ).catch((error: unknown) => {
      // The cluster's data dir goes with a failed start: the handler's last lines say what it was doing.
      throw new Error(`${(error as Error).message}\n${logTail(join(logDir, `virt-handler-${n}.log`), 20)}`, {
        cause: error,
      });
    });
  }
}

/** The last `lines` lines of a component's log, headed by its path, or a line saying it has none. */
function logTail(path: string, lines: number): string {
  if (!existsSync(path)) return `(no log at ${path})`;
  const tail = readFileSync(path, "utf8").trimEnd().split("\n").slice(-lines);
  return `last ${tail.length} lines of ${path}:\n${tail.join("\n")}`;
}

/** Cluster access from the kubeconfig the API server writes, once the server answers through it. */
function connectToApiServer(kubeconfig: string): Promise<{ kubeConfig: KubeAccess; transport: RestClient }> {
  return waitFor(
    "the API server to write its kubeconfig and answer",
    async () => {
      if (!existsSync(kubeconfig)) return undefined;
      const kubeConfig = kubeConfigFromFile(kubeconfig);
      const transport = new RestClient(kubeConfig, { userAgent: "local-cluster" });
      await resourceClient(transport, CORE_V1.namespaces).list();
      return { kubeConfig, transport };
    },
    START_TIMEOUT_MS,
  );
}

/** The CA (PEM) the kubeconfig trusts the API server by, if it names one. */
async function caPemOf(kubeConfig: KubeAccess): Promise<string | undefined> {
  const tls: { ca?: string | Buffer | (string | Buffer)[] } = {};
  await kubeConfig.applyToHTTPSOptions(tls);
  return tls.ca === undefined ? undefined : String(tls.ca);
}

/** Waits until every node of `names` reports Ready. */
async function waitForNodesReady(transport: RestTransport, names: readonly string[]): Promise<void> {
  const nodeClient = resourceClient<Node>(transport, CORE_V1.nodes);
  await waitFor(
    `nodes ${names.join(", ")} to be Ready`,
    async () => {
      const nodes = (await nodeClient.list()).items;
      return names.every((n) =>
        nodes
          .find((x) => x.metadata?.name === n)
          ?.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"),
      );
    },
    START_TIMEOUT_MS,
    200,
  );
}

/** The executable, its arguments and the runtime name the components run with. */
function runtimeCommand(options: LocalClusterOptions): Pick<ClusterLayout, "execPath" | "execArgs" | "runtime"> {
  if (options.execPath) {
    const runtime = options.runtime ?? runtimeNameOf(options.execPath);
    return { execPath: options.execPath, execArgs: options.execArgs ?? [], runtime };
  }
  const chosen = jsRuntime(options.runtime ?? currentRuntimeName(), options.projectRoot);
  return { execPath: chosen.execPath, execArgs: options.execArgs ?? chosen.execArgs, runtime: chosen.name };
}

/** The components' bundled entry modules (component-images.ts), or none to run the sources. */
async function componentEntries(options: LocalClusterOptions): Promise<Record<string, string> | undefined> {
  if (options.bundleComponents === false) return undefined;
  try {
    const node = jsRuntime("node", options.projectRoot).execPath;
    return await buildComponentImages(options.projectRoot, join(options.dataDir, "component-images"), node);
  } catch (error) {
    options.progress(`${(error as Error).message}; the components run from their TypeScript sources`);
    return undefined;
  }
}

/**
 * Starts the local cluster; resolves once the API server answers, the CRDs are installed, every node is Ready and
 * virt-api, virt-controller and the virt-handlers serve.
 */
export async function startLocalCluster(options: LocalClusterOptions): Promise<LocalCluster> {
  const dataDir = options.dataDir;
  const names = nodeNames(options.nodes ?? 2);
  for (const d of [dataDir, join(dataDir, "logs"), join(dataDir, "apiserver"), join(dataDir, "pki")])
    mkdirSync(d, { recursive: true });
  const state = await loadState(join(dataDir, "cluster.json"), names);
  const componentTls = componentTlsFiles(dataDir);
  const kubeletTls = await ensureKubeletCerts(join(dataDir, "pki"), names);
  const kubeconfig = join(dataDir, "kubeconfig");
  const podNetwork = await startPodNetwork(options, names);
  const componentEntriesBuilt = await componentEntries(options);
  const layout: ClusterLayout = {
    projectRoot: options.projectRoot,
    dataDir,
    kubeconfig,
    ...runtimeCommand(options),
    apiPort: state.apiPort,
    nodeNames: names,
    metricsPorts: state.metricsPorts,
    virtApiPort: state.virtApiPort,
    handlerPorts: state.handlerPorts,
    componentTls,
    frontProxy: await ensureFrontProxyTls(join(dataDir, "pki")),
    kubeletTls,
    tracesFile: options.tracesFile,
    nodeCpus: options.nodeCpus,
    ...(podNetwork ? { podNetworkFile: podNetworkFile(dataDir), serviceCidr: podNetwork.serviceCidr } : {}),
    componentEntries: componentEntriesBuilt,
    authorizationAuditLog: options.authorizationAuditLog,
  };
  const components = clusterComponents(layout);
  const supervisor = new Supervisor((e: SupervisorEvent) => {
    if (e.type === "exited" && e.restartInMs !== undefined) {
      options.progress(
        `${e.name} exited (code ${e.code ?? e.signal}); restarting in ${e.restartInMs / 1000}s (log: ${join(dataDir, "logs")})`,
      );
    }
  });
  const start = (name: string): void => {
    const c = components.find((x) => x.name === name)!;
    supervisor.start({
      name: c.name,
      argv: options.hideKvm ? [WITHOUT_KVM_WRAPPER, ...c.argv] : c.argv,
      env: c.env,
      logFile: join(dataDir, "logs", `${c.name.replace("/", "-")}.log`),
    });
  };
  const identities = componentIdentities(names);
  const componentTokens = ensureComponentTokens(tokenAuthFile(dataDir), identities);
  let volumes: ComponentVolumes | undefined;
  try {
    options.progress(`starting the API server on 127.0.0.1:${state.apiPort}`);
    start("apiserver");
    const { kubeConfig, transport } = await connectToApiServer(kubeconfig);
    // The kubelet's part for the components run as processes: their Secret and ConfigMap volumes, kept current.
    const componentVolumesWriter = componentVolumes(transport, dataDir);
    volumes = componentVolumesWriter;
    options.progress("installing the kubevirt.io CRDs");
    await installCrds(transport);
    await ensureKubeVirtCr(transport, options.useEmulation ?? true);
    options.progress("applying deploy/'s ServiceAccounts and RBAC; writing each component's kubeconfig");
    await applyReleaseRbac(transport, options.projectRoot);
    const server = kubeConfig.getCurrentCluster()?.server ?? "";
    writeComponentKubeconfigs(kubeconfig, server, await caPemOf(kubeConfig), identities, componentTokens);
    options.progress("registering virt-api's admission webhooks and the subresources.kubevirt.io APIService");
    await (options.registerVirtApi ?? registerVirtApi)(transport, state.virtApiPort);
    options.progress(`starting the scheduler and ${names.length} nodes (${names.join(", ")})`);
    start("scheduler");
    // The kubelets, then the service proxy where the cluster has a pod network.
    for (const c of components.filter((x) => /^(kubelet\/|service-proxy$)/.test(x.name))) start(c.name);
    options.progress("starting virt-controller; its certificate manager makes KubeVirt's CA and certificates");
    start("virt-controller");
    componentVolumesWriter.start();
    await waitFor("virt-controller's certificate Secrets", () => componentVolumesWriter.isReady(), START_TIMEOUT_MS);
    options.progress("starting virt-api and a virt-handler per node");
    start("virt-api");
    for (const n of names) start(`virt-handler/${n}`);
    await waitForNodesReady(transport, names);
    options.progress("waiting for virt-api, the virt-controller leader and every virt-handler to serve");
    await waitForComponents(state, names, componentTls, transport, join(dataDir, "logs"));
    options.progress("waiting for virt-controller to deploy the common instancetypes and preferences");
    await waitForCommonInstancetypes(transport);
    const scrapeConfigPath = join(dataDir, "prometheus.yml");
    writeFileSync(scrapeConfigPath, prometheusScrapeConfig(components));
    return {
      kubeconfig,
      kubeConfig,
      dataDir,
      nodeNames: names,
      scrapeConfigPath,
      supervisor,
      stop: () => stopAll(supervisor, podNetwork, volumes),
    };
  } catch (error) {
    await stopAll(supervisor, podNetwork, volumes);
    throw error;
  }
}

/** The pod network when enabled (see {@link LocalClusterOptions.podNetwork}), created before any kubelet starts. */
async function startPodNetwork(
  options: LocalClusterOptions,
  names: readonly string[],
): Promise<PodNetworkConfig | undefined> {
  if (!(options.podNetwork ?? process.getuid?.() === 0)) {
    options.progress("pods share the host's network (the pod network needs root)");
    return undefined;
  }
  const config = await createPodNetwork(options.dataDir, names, options.progress);
  options.progress(`pod network ${config.clusterCidr} on bridge ${config.bridge}`);
  return config;
}

/** The components' Secret and ConfigMap volumes under `dataDir` (component-volumes.ts), logged to logs/. */
function componentVolumes(transport: RestTransport, dataDir: string): ComponentVolumes {
  const dest = pino.destination({ dest: join(dataDir, "logs", "component-volumes.log"), sync: false, mkdir: true });
  return new ComponentVolumes({
    transport,
    namespace: KUBEVIRT_CR.namespace,
    dataDir,
    logger: pino({ base: { component: "component-volumes" } }, dest),
  });
}

/** Stops every component, then removes the pod network (its namespaces, the bridge, the IPAM state). */
async function stopAll(
  supervisor: Supervisor,
  podNetwork: PodNetworkConfig | undefined,
  volumes?: ComponentVolumes,
): Promise<void> {
  volumes?.stop();
  await supervisor.stopAll();
  if (podNetwork) await removePodNetwork(podNetwork);
}
