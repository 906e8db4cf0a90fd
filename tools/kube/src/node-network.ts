/**
 * The nodes' network: one Linux bridge on the host, one network namespace per node wired to it by a veth pair, and
 * routes for the pod CIDRs the controller manager gives the nodes (a host-gw network, as flannel's host-gw backend
 * or kubenet would make it). Everything is named with the cluster directory's tag, so clusters of different
 * directories never share a name, and is made by `up` and removed by `down`.
 *
 *   host (root netns)                                   node netns kvtk-<tag>-<i>
 *   kvtk-<tag> bridge 10.X.255.1/24                     eth0 10.X.255.(10+i)/24 <--veth--> kvtk-<tag>-<i> on the bridge
 *     kube-apiserver, docker-registry listen here       kubelet :10250, containerd, CNI bridge cni0 10.X.k.1/24
 *   route 10.X.k.0/24 via node i (node i's podCIDR)     route 10.X.m.0/24 via node j (every other node's podCIDR)
 *                                                       route 10.96.0.0/12 dev eth0 (Services, DNATed by kube-proxy)
 *   nft table inet kvtk-<tag>: nothing forwarded between the bridge and another interface
 *
 *   pod CIDRs: the controller manager allocates /24s of 10.X.0.0/17 (--cluster-cidr); node addresses: 10.X.255.0/24
 *
 * Nothing is routed off this machine: the node namespaces have no default route (a pod's packet to anywhere else
 * dies in its node), the host forwards nothing into or out of the bridge (the nft table), and no masquerade is set
 * up. Forwarding is switched on inside each node namespace only (its own sysctl), never on the host.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { resolve } from "node:path";
import { promisify } from "node:util";
import { ensureHostTools } from "@kvt/images";
import { cidrsOverlap, linkExists, namespacesWithPrefix, POD_NETWORK_TOOLS, runNft } from "@kvt/local-cluster";
import { SERVICE_CIDR } from "./control-plane.ts";
import { NODE_RUNTIME_TOOLS } from "./node-config.ts";

const exec = promisify(execFile);

/** Every host-global name of a cluster (bridge, namespaces, veths, cgroups, nft table, /run dir) starts with this. */
export const NAME_PREFIX = "kvtk-";

/** The most nodes a cluster may have: node addresses are 10.X.255.11 to 10.X.255.210. */
export const MAX_NODES = 200;

/** One node's place in the network. */
export interface NodeNetwork {
  /** The Kubernetes node name (`node01`, ...). */
  readonly name: string;
  /** Its network namespace, and the host end of its veth pair (the same name; at most 15 bytes). */
  readonly netns: string;
  readonly hostVeth: string;
  /** Its address on the bridge: the kubelet's --node-ip. */
  readonly ip: string;
}

/** The network of one cluster (written to `<cluster-dir>/network.json` by `up`). */
export interface ClusterNetwork {
  /** Six hex digits of the cluster directory's path. */
  readonly tag: string;
  /** The host bridge, also the nft table's name. */
  readonly bridge: string;
  /** The bridge's address: where kube-apiserver and the registry listen, and what the nodes reach them by. */
  readonly hostIp: string;
  /** The nodes' subnet on the bridge (a /24). */
  readonly nodeSubnet: string;
  /** What the controller manager allocates the nodes' pod CIDRs from (--cluster-cidr; /24 per node). */
  readonly clusterCidr: string;
  readonly nodes: readonly NodeNetwork[];
}

/** The tag of a cluster directory (stable for one path). */
export function clusterTag(clusterDir: string): string {
  return createHash("sha256").update(resolve(clusterDir)).digest("hex").slice(0, 6);
}

/** The node names of a cluster of `count` nodes: node01, node02, ... */
export function nodeNames(count: number): string[] {
  if (!Number.isInteger(count) || count < 0 || count > MAX_NODES) {
    throw new RangeError(`--nodes must be an integer from 0 to ${MAX_NODES}, not ${count}`);
  }
  return Array.from({ length: count }, (_, i) => `node${String(i + 1).padStart(2, "0")}`);
}

/**
 * Plans the network of the cluster in `clusterDir` (pure): `10.X.0.0/16` with X from 192 to 253, starting at the
 * tag's hash so that clusters of different directories start apart, and skipping every X whose /16 overlaps a
 * prefix in `inUse` (the host's routes: other clusters, the local cluster's 10.64-191 ranges, the uplink).
 */
export function planClusterNetwork(clusterDir: string, nodeCount: number, inUse: readonly string[]): ClusterNetwork {
  const names = nodeNames(nodeCount);
  const tag = clusterTag(clusterDir);
  const start = Number.parseInt(tag.slice(0, 4), 16) % 62;
  for (let i = 0; i < 62; i++) {
    const x = 192 + ((start + i) % 62);
    if (inUse.some((r) => cidrsOverlap(r, `10.${x}.0.0/16`))) continue;
    const bridge = `${NAME_PREFIX}${tag}`;
    return {
      tag,
      bridge,
      hostIp: `10.${x}.255.1`,
      nodeSubnet: `10.${x}.255.0/24`,
      clusterCidr: `10.${x}.0.0/17`,
      nodes: names.map((name, k) => ({
        name,
        netns: `${bridge}-${k + 1}`,
        hostVeth: `${bridge}-${k + 1}`,
        ip: `10.${x}.255.${11 + k}`,
      })),
    };
  }
  throw new RangeError("no free /16 in 10.192.0.0/10 for the nodes' network");
}

/** Checks a network read back from `network.json`; a TypeError names what is wrong. */
export function checkClusterNetwork(value: unknown, clusterDir: string): ClusterNetwork {
  const n = value as ClusterNetwork;
  const tag = clusterTag(clusterDir);
  const ipv4 = /^10\.\d{1,3}\.\d{1,3}\.\d{1,3}$/;
  if (typeof n !== "object" || n === null || n.tag !== tag || n.bridge !== `${NAME_PREFIX}${tag}`) {
    throw new TypeError(`network.json is not this cluster directory's (tag ${tag})`);
  }
  const nodes: unknown = n.nodes;
  if (!ipv4.test(n.hostIp) || !Array.isArray(nodes)) throw new TypeError("network.json: hostIp or nodes is wrong");
  for (const node of nodes as NodeNetwork[]) {
    if (!node.netns?.startsWith(`${n.bridge}-`) || !ipv4.test(node.ip) || !/^node\d+$/.test(node.name)) {
      throw new TypeError(`network.json: node ${JSON.stringify(node)} is wrong`);
    }
  }
  return n;
}

/** The nft table that keeps the bridge's traffic on the bridge (pure). */
export function forwardGuardRuleset(bridge: string): string {
  return [
    `table inet ${bridge} {`,
    "  chain forward {",
    "    type filter hook forward priority filter; policy accept;",
    `    iifname "${bridge}" oifname != "${bridge}" drop`,
    `    oifname "${bridge}" iifname != "${bridge}" drop`,
    "  }",
    "}",
    "",
  ].join("\n");
}

const ip = (...args: string[]): Promise<unknown> => exec("ip", args);
const inNode = (node: NodeNetwork, ...args: string[]): Promise<unknown> => exec("ip", ["-n", node.netns, ...args]);

/**
 * Makes the network of `net` (after removing whatever a crashed run left under its names): the bridge and its
 * address, the nft guard, and each node's namespace with `lo` and `eth0` up and forwarding on inside it.
 */
export async function createClusterNetwork(net: ClusterNetwork, log: (line: string) => void): Promise<void> {
  // The nodes' tools, before their namespaces exist: the CNI plugins, iproute2, nftables, and runc for containerd.
  await ensureHostTools([...POD_NETWORK_TOOLS, ...NODE_RUNTIME_TOOLS], log);
  await removeClusterNetwork(net);
  const prefix = net.nodeSubnet.split("/")[1];
  await ip("link", "add", "name", net.bridge, "type", "bridge");
  await ip("addr", "add", `${net.hostIp}/${prefix}`, "dev", net.bridge);
  await ip("link", "set", net.bridge, "up");
  await runNft(forwardGuardRuleset(net.bridge));
  for (const node of net.nodes) {
    await ip("netns", "add", node.netns);
    await ip("link", "add", node.hostVeth, "type", "veth", "peer", "name", "eth0", "netns", node.netns);
    await ip("link", "set", node.hostVeth, "master", net.bridge, "up");
    await inNode(node, "addr", "add", `${node.ip}/${prefix}`, "dev", "eth0");
    await inNode(node, "link", "set", "lo", "up");
    await inNode(node, "link", "set", "eth0", "up");
    // The node routes its pods' packets to other nodes' pods: forwarding in this namespace only.
    await exec("ip", ["netns", "exec", node.netns, "sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    // A real node reaches a ClusterIP by its default route, and kube-proxy's DNAT then picks the endpoint; these
    // namespaces have no default route, so a connection from the node itself to a Service failed (ENETUNREACH)
    // before kube-proxy saw it. The Service range gets that route; a ClusterIP nothing answers dies at the host's
    // nft guard like any other packet for outside.
    await inNode(node, "route", "add", SERVICE_CIDR, "dev", "eth0");
  }
}

/**
 * Routes each node's pod CIDR: on the host via the node, and in every other node's namespace via the node.
 * Idempotent (`ip route replace`); `podCidrs` maps node names to their spec.podCIDR.
 */
export async function routePodCidrs(net: ClusterNetwork, podCidrs: Readonly<Record<string, string>>): Promise<void> {
  for (const node of net.nodes) {
    const cidr = podCidrs[node.name];
    if (!cidr) continue;
    if (!cidrsOverlap(cidr, net.clusterCidr))
      throw new RangeError(`${node.name}'s podCIDR ${cidr} is outside ${net.clusterCidr}`);
    await ip("route", "replace", cidr, "via", node.ip, "dev", net.bridge);
    for (const other of net.nodes) {
      if (other !== node) await inNode(other, "route", "replace", cidr, "via", node.ip, "dev", "eth0");
    }
  }
}

/**
 * Removes the network: every namespace named with the tag (processes still inside are killed first by the caller,
 * see node-host.ts), the nft table, and the bridge with whatever is still enslaved to it; its routes go with it.
 * Idempotent.
 */
export async function removeClusterNetwork(net: Pick<ClusterNetwork, "bridge">): Promise<void> {
  for (const ns of await namespacesWithPrefix(`${net.bridge}-`)) {
    await ip("netns", "delete", ns).catch(() => undefined); // gone meanwhile
  }
  await runNft(`delete table inet ${net.bridge}\n`).catch(() => undefined); // never made, or removed already
  if (await linkExists(net.bridge)) {
    const { stdout } = (await exec("ip", ["-j", "link", "show", "master", net.bridge])) as { stdout: string };
    for (const port of JSON.parse(stdout || "[]") as { ifname: string }[]) {
      await ip("link", "delete", port.ifname).catch(() => undefined); // its namespace went and took it
    }
    await ip("link", "delete", net.bridge);
  }
}
