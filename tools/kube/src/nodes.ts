/**
 * The nodes of `npm run kube -- up`: their files before the supervisor starts them, and what `up` does once their
 * kubelets run, until every node is Ready:
 *
 *   prepareNodes:   directories, cgroups, certificates' kubeconfig, containerd.toml, hosts.toml, kubelet config
 *   (supervisor)    containerd/<node>, kubelet/<node> inside the node's network namespace
 *   joinNodes:      each Node registered with spec.podCIDR (the controller manager's)  -> its CNI conflist written
 *                   (containerd picks it up and reports the network ready) -> pod CIDR routes on the host and in
 *                   every other node -> every node Ready
 *   releaseNodes:   (down) node-host.ts for each node, then the network
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { CORE_V1, kubeConfigFromFile, RestClient, resourceClient } from "@kvt/kube";
import { waitFor } from "@kvt/local-cluster";
import type { NodeObject } from "./cluster-health.ts";
import { type ControlPlaneLayout, clusterPaths, renderCertKubeconfig } from "./control-plane.ts";
import type { NodeCertificates } from "./control-plane-pki.ts";
import {
  cniConfList,
  cniConfListFile,
  containerdConfig,
  kubeletConfig,
  kubeProxyConfig,
  type NodeClusterFacts,
  type NodeLayout,
  nodePaths,
  registryHostsFiles,
} from "./node-config.ts";
import {
  createNodeCgroups,
  createNodeMountNamespace,
  nodeCgroupRoot,
  nodeRunDir,
  releaseNode,
  removeClusterRunDir,
} from "./node-host.ts";
import { type ClusterNetwork, removeClusterNetwork, routePodCidrs } from "./node-network.ts";
import { registryClientCert } from "./registry.ts";

/** The layout of each node of `net` in the cluster directory `dir`. */
export function nodeLayouts(dir: string, net: ClusterNetwork): NodeLayout[] {
  return net.nodes.map((n) => ({
    name: n.name,
    ip: n.ip,
    netns: n.netns,
    dir: join(clusterPaths(dir).nodes, n.name),
    runDir: nodeRunDir(net, n),
    cgroupRoot: nodeCgroupRoot(net, n),
    cniNetwork: net.bridge,
  }));
}

/** The facts every node's files name, for node `name`. */
export function nodeFacts(
  layout: ControlPlaneLayout,
  certs: Readonly<Record<string, NodeCertificates>>,
  name: string,
  sandboxImage: string,
): NodeClusterFacts {
  const c = certs[name];
  if (!c) throw new Error(`no certificates for node ${name}`);
  return {
    binDir: layout.binDir,
    apiserverUrl: `https://${layout.hostIp}:${layout.ports.apiserver}`,
    caFile: layout.pki.ca.cert,
    registry: `${layout.hostIp}:${layout.ports.registry}`,
    sandboxImage,
    registryClient: registryClientCert(layout.pki.dir),
    kubeProxyCert: layout.pki.kubeProxy,
    clusterCidr: layout.clusterCidr,
    clientCert: c.client,
    servingCert: c.serving,
  };
}

/** Makes a node's directories, cgroups, mount namespace and configuration (its old state is removed first). */
export async function prepareNode(node: NodeLayout, facts: NodeClusterFacts): Promise<void> {
  rmSync(node.dir, { recursive: true, force: true });
  rmSync(node.runDir, { recursive: true, force: true });
  const p = nodePaths(node);
  for (const d of [p.kubeletRoot, p.containerdRoot, p.cniConfDir, p.ipamDir, p.podLogs, p.volumePlugins, p.opt]) {
    mkdirSync(d, { recursive: true });
  }
  for (const d of [p.containerdState, p.runcRoot, p.shimSockets]) mkdirSync(d, { recursive: true, mode: 0o711 });
  createNodeCgroups(node.cgroupRoot);
  await createNodeMountNamespace(p.mountNamespace, p.kubeletRoot);
  writeFileSync(
    p.kubeconfig,
    renderCertKubeconfig(facts.apiserverUrl, facts.caFile, facts.clientCert, `system:node:${node.name}`),
    { mode: 0o600 },
  );
  writeFileSync(p.containerdConfig, containerdConfig(node, facts));
  for (const [file, text] of Object.entries(registryHostsFiles(node, facts))) {
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, text);
  }
  writeFileSync(p.kubeletConfig, kubeletConfig(node, facts));
  writeFileSync(
    p.kubeProxyKubeconfig,
    renderCertKubeconfig(facts.apiserverUrl, facts.caFile, facts.kubeProxyCert, "system:kube-proxy"),
    { mode: 0o600 },
  );
  writeFileSync(p.kubeProxyConfig, kubeProxyConfig(node, facts));
}

/** What `joinNodes` saw of each node. */
export interface JoinedNode {
  readonly name: string;
  readonly podCidr: string;
  /** Milliseconds from its kubelet's start until the node was Ready. */
  readonly readyAfterMs: number;
}

/**
 * Whether `node` reports Ready from a heartbeat at or after `sinceMs`. A Node kept in etcd from an earlier run still
 * says Ready until the node lifecycle controller's grace period ends; only a fresh heartbeat is this run's kubelet.
 */
export function readySince(node: NodeObject | undefined, sinceMs: number): boolean {
  const ready = node?.status?.conditions?.find((c) => c.type === "Ready");
  // Heartbeats have whole seconds: compare with the second `sinceMs` falls in.
  const heartbeat = Date.parse(ready?.lastHeartbeatTime ?? "");
  return ready?.status === "True" && heartbeat >= Math.floor(sinceMs / 1000) * 1000;
}

/**
 * Waits for every node to register and get its podCIDR, gives each its CNI network and the routes to the others'
 * pods, then waits until all are Ready with a heartbeat from `since` on (when their kubelets started). Resolves with
 * each node's podCIDR and time to Ready.
 */
export async function joinNodes(
  kubeconfig: string,
  net: ClusterNetwork,
  nodes: readonly NodeLayout[],
  timing: { readonly since: number; readonly timeoutMs: number },
  log: (line: string) => void,
): Promise<JoinedNode[]> {
  const { since, timeoutMs } = timing;
  const client = resourceClient<NodeObject>(
    new RestClient(kubeConfigFromFile(kubeconfig), { userAgent: "kube-up" }),
    CORE_V1.nodes,
  );
  const podCidrs: Record<string, string> = {};
  const readyAt: Record<string, number> = {};
  const pending = new Set(nodes.map((n) => n.name));
  await waitFor(
    `nodes ${nodes.map((n) => n.name).join(", ")} to be Ready`,
    async () => {
      const listed = new Map((await client.list()).items.map((n) => [n.metadata?.name ?? "", n]));
      let routed = false;
      for (const node of nodes) {
        const cidr = listed.get(node.name)?.spec?.podCIDR;
        if (cidr && podCidrs[node.name] !== cidr) {
          podCidrs[node.name] = cidr;
          writeFileSync(cniConfListFile(node), cniConfList(node, cidr));
          log(`${node.name} registered, podCIDR ${cidr}`);
          routed = true;
        }
        if (pending.has(node.name) && readySince(listed.get(node.name), since)) {
          pending.delete(node.name);
          readyAt[node.name] = Date.now() - since;
          log(`${node.name} Ready ${(readyAt[node.name] / 1000).toFixed(1)} s after its kubelet started`);
        }
      }
      if (routed) await routePodCidrs(net, podCidrs);
      return pending.size === 0;
    },
    timeoutMs,
    500,
  );
  return nodes.map((n) => ({ name: n.name, podCidr: podCidrs[n.name] ?? "", readyAfterMs: readyAt[n.name] ?? 0 }));
}

/** Reads `<cluster-dir>/network.json`, or undefined when there is none. */
export function readNetworkFile(dir: string, check: (value: unknown) => ClusterNetwork): ClusterNetwork | undefined {
  const file = clusterPaths(dir).network;
  if (!existsSync(file)) return undefined;
  return check(JSON.parse(readFileSync(file, "utf8")));
}

/**
 * Removes everything the nodes of `net` and the network left on the host (node-host.ts, node-network.ts), and the
 * nodes' directories. The kubelets and containerds must have been stopped. Idempotent.
 */
export async function releaseNodes(dir: string, net: ClusterNetwork): Promise<void> {
  const layouts = nodeLayouts(dir, net);
  for (const [i, node] of net.nodes.entries()) {
    const nodeDir = layouts[i]?.dir ?? join(clusterPaths(dir).nodes, node.name);
    await releaseNode(net, node, nodeDir);
    rmSync(nodeDir, { recursive: true, force: true });
  }
  await removeClusterNetwork(net);
  removeClusterRunDir(net);
}
