/**
 * `npm run kube -- up|down|status`: the real control plane, a registry and N nodes as processes on this machine.
 *
 *   up:     network (bridge, node namespaces; node-network.ts) -> certificates, ports, kubeconfigs, node files
 *           (foreground, so errors show) -> spawn `cli.ts supervise` detached -> kube-apiserver /readyz
 *           -> node images pushed to the registry -> nodes registered, given their CNI network and routes, Ready
 *           -> the storage provisioner (local-path.ts) installed and rolled out; StorageClass local-block and
 *           the token of its host provisioner (local-block.ts, a supervised process waiting for it)
 *           -> print `export KUBECONFIG=<admin.kubeconfig>`
 *   supervise: local-cluster's Supervisor runs etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
 *           the registry, the local-block provisioner and each node's containerd, kubelet and kube-proxy (restart
 *           with backoff, each logging to logs/<name>.log, each dying with it through setpriv's parent-death
 *           signal); state.json names its pid and theirs; SIGTERM stops them all, last started first.
 *   down:   SIGTERM to the supervisor, wait; any recorded component still alive is killed by pid after checking
 *           its command line; the Block volumes' loop devices detached (local-block.ts); then the nodes' pods,
 *           shims, mounts, cgroups and the network go (nodes.ts).
 *   status: each component's pid, RSS and health (verified against our CAs), and each node as the API reports it.
 */
import { spawn } from "node:child_process";
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { ensureHostTools } from "@kvt/images";
import { prefixesInUse, processAlive, Supervisor, waitFor } from "@kvt/local-cluster";
import { createLogger } from "@kvt/observability";
import { freePort } from "@kvt/runtime";
import { binariesReady, binDir, DEFAULT_DATA_DIR } from "./build.ts";
import { type ComponentHealth, type NodeStatus, probeComponent, probeNodes } from "./cluster-health.ts";
import {
  apiserverArgs,
  type ControlPlaneLayout,
  type ControlPlanePorts,
  clusterPaths,
  controllerManagerArgs,
  controlPlaneKubeconfigs,
  etcdArgs,
  schedulerArgs,
} from "./control-plane.ts";
import {
  controlPlanePkiFiles,
  ensureControlPlanePki,
  ensureNodeCertificates,
  ensureRegistryCertificates,
} from "./control-plane-pki.ts";
import {
  installLocalBlock,
  LOCAL_BLOCK_CLASS,
  LOCAL_BLOCK_COMPONENT,
  localBlockDir,
  localBlockKubeconfig,
  releaseLocalBlockDevices,
} from "./local-block.ts";
import { installLocalPath, LOCAL_PATH_STORAGE_CLASS, type LocalPathOptions, storageDir } from "./local-path.ts";
import { containerdArgs, containerdEnv, kubeletArgs, kubeProxyArgs } from "./node-config.ts";
import { buildNodeImages, pushNodeImages } from "./node-images.ts";
import {
  type ClusterNetwork,
  checkClusterNetwork,
  clusterTag,
  createClusterNetwork,
  NAME_PREFIX,
  planClusterNetwork,
} from "./node-network.ts";
import {
  type JoinedNode,
  joinNodes,
  nodeFacts,
  nodeLayouts,
  prepareNode,
  readNetworkFile,
  releaseNodes,
} from "./nodes.ts";
import { REGISTRY_TOOLS, registryAddress, registryArgs, registryConfig, registryPaths } from "./registry.ts";

export type { ComponentHealth, NodeStatus } from "./cluster-health.ts";

/** The control plane's components, in start order; the registry and the nodes' components follow. */
export const CONTROL_PLANE = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"] as const;

/** The command-line entry point (`supervise` and the local-block provisioner run through it). */
const CLI = new URL("./cli.ts", import.meta.url).pathname;

/** The default number of nodes of `up`. */
export const DEFAULT_NODES = 2;

/** What `state.json` records while the supervisor runs. */
export interface ClusterState {
  readonly supervisorPid: number;
  readonly ports: ControlPlanePorts;
  readonly binDir: string;
  /** Each running component's pid, by name (`etcd`, ..., `registry`, `containerd/node01`, `kubelet/node01`, ...). */
  readonly pids: Readonly<Record<string, number>>;
}

/** Where the binaries and the cluster live: the data dir (binaries) and the cluster dir (default <data-dir>/cluster). */
export interface ClusterLocation {
  readonly dataDir?: string;
  readonly clusterDir?: string;
}

/** The data directory and cluster directory of `where`, defaults filled in. */
export function resolveLocation(where: ClusterLocation = {}): { dataDir: string; dir: string } {
  const dataDir = where.dataDir ?? DEFAULT_DATA_DIR;
  return { dataDir, dir: where.clusterDir ?? join(dataDir, "cluster") };
}

/** A cluster command failed in a way the user can act on. */
export class KubeClusterError extends Error {
  override readonly name = "KubeClusterError";
}

/** The cluster's network, from network.json (made by `up`). */
export function readNetwork(where: ClusterLocation = {}): ClusterNetwork | undefined {
  const { dir } = resolveLocation(where);
  return readNetworkFile(dir, (value) => checkClusterNetwork(value, dir));
}

/** The layout of a cluster, from its ports and network files (made by `up`). */
export function readLayout(where: ClusterLocation = {}): ControlPlaneLayout {
  const { dataDir, dir } = resolveLocation(where);
  const ports = JSON.parse(readFileSync(clusterPaths(dir).ports, "utf8")) as ControlPlanePorts;
  const net = readNetwork(where);
  if (!net) throw new KubeClusterError(`${clusterPaths(dir).network} is missing: run npm run kube -- up`);
  const pki = controlPlanePkiFiles(join(dir, "pki"));
  return { dir, binDir: binDir(dataDir), pki, ports, hostIp: net.hostIp, clusterCidr: net.clusterCidr };
}

/** Every component the supervisor runs, in start order: name, argv, environment. */
export function componentSpecs(
  layout: ControlPlaneLayout,
  net: ClusterNetwork,
): { name: string; argv: string[]; env?: Record<string, string> }[] {
  const specs: { name: string; argv: string[]; env?: Record<string, string> }[] = [
    { name: "etcd", argv: etcdArgs(layout) },
    { name: "kube-apiserver", argv: apiserverArgs(layout) },
    { name: "kube-controller-manager", argv: controllerManagerArgs(layout) },
    { name: "kube-scheduler", argv: schedulerArgs(layout) },
    { name: "registry", argv: registryArgs(layout) },
  ];
  if (net.nodes.length > 0) {
    // The Block provisioner (local-block.ts): a host process (losetup) waiting for the kubeconfig `up` writes once
    // the nodes are Ready (no nodes: no storage, as for local-path).
    const argv = [process.execPath, CLI, LOCAL_BLOCK_COMPONENT, "--cluster-dir", layout.dir];
    specs.push({ name: LOCAL_BLOCK_COMPONENT, argv });
  }
  for (const node of nodeLayouts(layout.dir, net)) {
    specs.push({ name: `containerd/${node.name}`, argv: containerdArgs(node, layout), env: containerdEnv(layout) });
    specs.push({ name: `kubelet/${node.name}`, argv: kubeletArgs(node, layout) });
    specs.push({ name: `kube-proxy/${node.name}`, argv: kubeProxyArgs(node, layout), env: containerdEnv(layout) });
  }
  return specs;
}

/** The running cluster's state, or undefined when no supervisor of it is alive. */
export function readState(where: ClusterLocation = {}): ClusterState | undefined {
  const file = clusterPaths(resolveLocation(where).dir).state;
  if (!existsSync(file)) return undefined;
  try {
    const state = JSON.parse(readFileSync(file, "utf8")) as ClusterState;
    return processAlive(state.supervisorPid) ? state : undefined;
  } catch {
    return undefined;
  }
}

export interface UpOptions extends ClusterLocation {
  /** How many nodes (default {@link DEFAULT_NODES}; 0: the control plane alone). */
  readonly nodes?: number;
  /** How long to wait for /readyz and for the nodes (each; default 180 s: a loaded 2-core host). */
  readonly timeoutMs?: number;
  readonly log?: (line: string) => void;
}

/** What `up` brought up. */
export interface UpResult {
  readonly kubeconfig: string;
  /** `HOST:PORT` of the registry the nodes pull from. */
  readonly registry: string;
  /** The registry's CA and a client certificate, as `skopeo --dest-cert-dir` reads them. */
  readonly registryCertDir: string;
  /** The pause, busybox and local-path-provisioner images' references in that registry. */
  readonly images: { readonly pause: string; readonly busybox: string; readonly localPath: string };
  readonly nodes: readonly JoinedNode[];
  /** Milliseconds from the call until kube-apiserver was ready, and until every node was Ready. */
  readonly apiserverReadyMs: number;
  readonly nodesReadyMs: number;
  /** Milliseconds the storage provisioners took from apply to ready (0 without nodes: not installed). */
  readonly storageReadyMs: number;
}

/** Starts the cluster unless it runs; resolves once kube-apiserver is ready and every node is Ready. */
export async function up(options: UpOptions = {}): Promise<UpResult> {
  const started = Date.now();
  const { dataDir, dir } = resolveLocation(options);
  const log = options.log ?? ((line: string) => void process.stdout.write(`[kube] ${line}\n`));
  const timeoutMs = options.timeoutMs ?? 180_000;
  if (!binariesReady(dataDir)) {
    throw new KubeClusterError(
      `the Kubernetes binaries are not built in ${binDir(dataDir)}. Next: npm run kube -- build (about 30-60 min cold)`,
    );
  }
  const paths = clusterPaths(dir);
  if (readState(options)) throw new KubeClusterError(`already up in ${dir}; npm run kube -- status, or down first`);
  mkdirSync(paths.logs, { recursive: true });

  // A crashed run's network and nodes go first; then a fresh plan (the host's routes may have changed).
  const old = readNetwork(options);
  if (old) await releaseNodes(dir, old);
  const net = planClusterNetwork(
    dir,
    options.nodes ?? DEFAULT_NODES,
    await prefixesInUse(`${NAME_PREFIX}${clusterTag(dir)}`),
  );
  writeFileSync(paths.network, `${JSON.stringify(net, null, 2)}\n`);
  log(`network: bridge ${net.bridge} ${net.hostIp}, ${net.nodes.length} node namespaces, pods from ${net.clusterCidr}`);
  await createClusterNetwork(net, log);
  await ensureHostTools(REGISTRY_TOOLS, log);

  log(`certificates in ${join(dir, "pki")}`);
  await ensureControlPlanePki(join(dir, "pki"), net.hostIp);
  const certs = await ensureNodeCertificates(join(dir, "pki"), net.nodes);
  const registryTls = await ensureRegistryCertificates(join(dir, "pki"), net.hostIp);
  await ensurePorts(paths.ports);
  const layout = readLayout(options);
  for (const [file, text] of Object.entries(controlPlaneKubeconfigs(layout)))
    writeFileSync(file, text, { mode: 0o600 });
  const registry = registryAddress(layout);
  mkdirSync(registryPaths(dir).storage, { recursive: true });
  writeFileSync(registryPaths(dir).config, registryConfig(layout));

  const images = await buildNodeImages(dataDir, log);
  for (const node of nodeLayouts(dir, net)) {
    await prepareNode(node, nodeFacts(layout, certs, node.name, `${registry}/${images.pause.reference}`));
  }

  const kubeletsStart = Date.now();
  const out = openSync(paths.daemonLog, "a");
  rmSync(localBlockKubeconfig(dir), { force: true }); // a token of the last run's account: made again below
  const daemon = spawn(process.execPath, [CLI, "supervise", "--data-dir", dataDir, "--cluster-dir", dir], {
    detached: true,
    stdio: ["ignore", out, out],
  });
  closeSync(out);
  daemon.unref();
  log(`supervisor pid ${daemon.pid}; logs in ${paths.logs}`);
  const exited = new Promise<number | null>((resolve) => daemon.once("exit", (code) => resolve(code)));
  const ready = waitReady(layout, timeoutMs);
  const first = await Promise.race([ready.then(() => "ready" as const), exited]);
  if (first !== "ready") {
    throw new KubeClusterError(
      `the supervisor exited (code ${first}) before kube-apiserver was ready; see ${paths.daemonLog} and ${paths.logs}/*.log`,
    );
  }
  const apiserverReadyMs = Date.now() - started;
  log(
    `kube-apiserver ready at https://${net.hostIp}:${layout.ports.apiserver} after ${(apiserverReadyMs / 1000).toFixed(1)} s`,
  );

  await waitFor(`the registry at ${registry}`, async () => (await probeComponent(layout, "registry")).ok, 30_000, 200);
  await pushNodeImages(images, registry, registryTls.clientDir, join(dataDir, "node-images"), log);

  const timing = { since: kubeletsStart, timeoutMs };
  const nodes = await joinNodes(paths.adminKubeconfig, net, nodeLayouts(dir, net), timing, log).catch(
    (error: unknown) => {
      const message = `${(error as Error).message}; see ${paths.logs}/kubelet-*.log and containerd-*.log`;
      throw new KubeClusterError(message, { cause: error });
    },
  );
  const nodesReadyMs = Date.now() - started;
  const image = (built: { reference: string }): string => `${registry}/${built.reference}`;
  const storage = { image: image(images.localPath), helperImage: image(images.busybox), sharedPath: storageDir(dir) };
  const storageReadyMs = nodes.length > 0 ? await installStorage(layout, storage, timeoutMs, log) : 0;
  log(`kubectl of the same release: ${layout.binDir}/kubectl`);
  log(`push the release: npm run images -- push --registry ${registry} --cert-dir ${registryTls.clientDir}`);
  return {
    kubeconfig: paths.adminKubeconfig,
    registry,
    registryCertDir: registryTls.clientDir,
    images: { pause: image(images.pause), busybox: image(images.busybox), localPath: image(images.localPath) },
    nodes,
    apiserverReadyMs,
    nodesReadyMs,
    storageReadyMs,
  };
}

/** Installs local-path-provisioner (local-path.ts) and waits for it; returns how long that took. */
async function installStorage(
  layout: ControlPlaneLayout,
  options: LocalPathOptions,
  timeoutMs: number,
  log: (line: string) => void,
): Promise<number> {
  const started = Date.now();
  const kubeconfig = clusterPaths(layout.dir).adminKubeconfig;
  const kubectl = join(layout.binDir, "kubectl");
  await installLocalPath(kubectl, kubeconfig, layout.dir, options, timeoutMs).catch((error: unknown) => {
    const message = `the storage provisioner did not roll out: ${(error as Error).message}`;
    throw new KubeClusterError(message, { cause: error });
  });
  const ms = Date.now() - started;
  log(
    `default StorageClass ${LOCAL_PATH_STORAGE_CLASS}: local-path-provisioner rolled out in ` +
      `${(ms / 1000).toFixed(1)} s; claims under ${options.sharedPath}`,
  );
  await installLocalBlock(kubectl, kubeconfig, layout.dir, timeoutMs).catch((error: unknown) => {
    const message = `the local-block provisioner's objects: ${(error as Error).message}`;
    throw new KubeClusterError(message, { cause: error });
  });
  log(
    `StorageClass ${LOCAL_BLOCK_CLASS}: Block claims as loop devices under ${localBlockDir(layout.dir)} ` +
      `(${LOCAL_BLOCK_COMPONENT}, a host process)`,
  );
  return Date.now() - started;
}

/** Picks the cluster's ports once (six distinct free ports) and keeps them; a file of an older layout is redone. */
async function ensurePorts(file: string): Promise<void> {
  if (existsSync(file) && typeof (JSON.parse(readFileSync(file, "utf8")) as ControlPlanePorts).registry === "number") {
    return;
  }
  // freePort closes each port before the next is picked, so the kernel could hand one out twice: keep them distinct.
  const picked = new Set<number>();
  while (picked.size < 6) picked.add(await freePort());
  const [etcdClient, etcdPeer, apiserver, controllerManager, scheduler, registry] = [...picked];
  const ports: ControlPlanePorts = { etcdClient, etcdPeer, apiserver, controllerManager, scheduler, registry };
  writeFileSync(file, `${JSON.stringify(ports, null, 2)}\n`);
}

async function waitReady(layout: ControlPlaneLayout, timeoutMs: number): Promise<void> {
  const logs = clusterPaths(layout.dir).logs;
  try {
    await waitFor(
      "kube-apiserver /readyz",
      async () => (await probeComponent(layout, "kube-apiserver")).ok,
      timeoutMs,
      500,
    );
  } catch (error) {
    throw new KubeClusterError(`${(error as Error).message}; see ${logs}/kube-apiserver.log and ${logs}/etcd.log`);
  }
}

/** The log file of component `name` (`kubelet/node01` -> logs/kubelet-node01.log). */
export function componentLog(dir: string, name: string): string {
  return join(clusterPaths(dir).logs, `${name.replaceAll("/", "-")}.log`);
}

/** Runs the supervisor in this process until SIGTERM/SIGINT (the detached child `up` starts). */
export async function supervise(where: ClusterLocation): Promise<void> {
  const logger = createLogger({ component: "kube-supervisor" });
  const layout = readLayout(where);
  const net = readNetwork(where) as ClusterNetwork;
  const paths = clusterPaths(layout.dir);
  const pids: Record<string, number> = {};
  const writeState = (): void => {
    const state: ClusterState = { supervisorPid: process.pid, ports: layout.ports, binDir: layout.binDir, pids };
    const tmp = `${paths.state}.${process.pid}`;
    writeFileSync(tmp, `${JSON.stringify(state, null, 2)}\n`);
    renameSync(tmp, paths.state);
  };
  const supervisor = new Supervisor((event) => {
    if (event.type === "started") pids[event.name] = event.pid;
    else delete pids[event.name];
    logger.info(event, `component ${event.type}`);
    writeState();
  });
  if (!supervisor.parentDeathSignal) logger.warn("setpriv is missing: components outlive a killed supervisor");
  writeState();
  for (const spec of componentSpecs(layout, net)) {
    supervisor.start({ ...spec, logFile: componentLog(layout.dir, spec.name) });
  }
  await new Promise<void>((resolve) => {
    for (const signal of ["SIGTERM", "SIGINT"] as const) process.once(signal, () => resolve());
  });
  logger.info("stopping");
  await supervisor.stopAll();
  rmSync(paths.state, { force: true });
  logger.info("stopped");
}

/** Stops the supervisor and every component, then removes the nodes and the network; true when something was there. */
export async function down(where: ClusterLocation = {}, log = (_line: string): void => {}): Promise<boolean> {
  const { dir } = resolveLocation(where);
  const file = clusterPaths(dir).state;
  const net = readNetwork(where);
  if (!existsSync(file) && !net) return false;
  if (existsSync(file)) {
    const state = JSON.parse(readFileSync(file, "utf8")) as ClusterState;
    const pids = Object.values(state.pids);
    if (processAlive(state.supervisorPid)) {
      log(`stopping supervisor pid ${state.supervisorPid}`);
      process.kill(state.supervisorPid, "SIGTERM");
      await waitFor("the supervisor to stop", () => !processAlive(state.supervisorPid), 60_000, 100).catch(() => {
        process.kill(state.supervisorPid, "SIGKILL");
      });
    }
    for (const pid of pids) {
      if (processAlive(pid) && ourProcess(pid, state.binDir)) {
        log(`killing leftover component pid ${pid}`);
        process.kill(pid, "SIGKILL");
      }
    }
    await waitFor(
      "every component to exit",
      () => pids.every((p) => !processAlive(p) || !ourProcess(p, state.binDir)),
      15_000,
    );
    rmSync(file, { force: true });
  }
  // The provisioner detached its devices when it stopped; a killed one could not: none outlives the cluster.
  const detached = releaseLocalBlockDevices(dir, (line) => log(line));
  if (detached.length > 0) log(`detached ${detached.length} loop devices of Block volumes: ${detached.join(", ")}`);
  if (net) {
    log(`removing ${net.nodes.length} nodes and the network ${net.bridge}`);
    await releaseNodes(dir, net);
    rmSync(clusterPaths(dir).network, { force: true });
  }
  return true;
}

/** Every component's pid, RSS and health, and each node as the API reports it; empty when nothing runs. */
export async function status(
  where: ClusterLocation = {},
): Promise<{ components: ComponentHealth[]; nodes: NodeStatus[] }> {
  const state = readState(where);
  if (!state) return { components: [], nodes: [] };
  const layout = readLayout(where);
  const net = readNetwork(where) as ClusterNetwork;
  const components: ComponentHealth[] = [];
  for (const spec of componentSpecs(layout, net)) {
    components.push(await probeComponent(layout, spec.name, state.pids[spec.name], net));
  }
  const nodes = await probeNodes(clusterPaths(layout.dir).adminKubeconfig).catch(() => []);
  return { components, nodes };
}

/** Whether `pid` runs one of our binaries or the registry (guards against a recycled pid). */
function ourProcess(pid: number, dir: string): boolean {
  try {
    const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    const provisioner = argv[1] === CLI && argv[2] === LOCAL_BLOCK_COMPONENT;
    return (
      provisioner || argv.some((a) => a.startsWith(`${dir}/`) || dirname(a) === dir || a.endsWith("docker-registry"))
    );
  } catch {
    return false;
  }
}
