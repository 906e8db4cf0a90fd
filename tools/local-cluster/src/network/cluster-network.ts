/**
 * The local cluster's pod network, as a cluster's network add-on would provide it: one Linux bridge and one IPv4
 * /16 that the cluster creates for itself, a /24 of it per node (as a node's podCIDR), and every pod in its own
 * network namespace wired to the bridge by the real CNI plugins (pod-network.ts, called by each process-kubelet);
 * and a second /16 for Services' ClusterIPs, routed by the service proxy's nftables table (proxy/).
 *
 *   host (root netns)                         pod netns kvt-<tag>-<pod uid>
 *   kvt-<tag> bridge, 10.N.0.1/16  <──veth──> eth0 10.N.<node>.x/16     lo 127.0.0.1
 *   route 10.M.0.0/16 dev kvt-<tag>            route 10.M.0.0/16 via 10.N.0.1   (M: the service range)
 *   nft table ip kvt-<tag>: ClusterIP -> pod DNAT, masquerade onto the bridge, nothing forwarded elsewhere
 *
 * Nothing is routed off this machine: the pods get no default route (only the bridge's /16 and the service range
 * are reachable), the bridge plugin runs without `isGateway` and `ipMasq` (the host's ip_forward is never touched,
 * no masquerade to the host's uplink). Forwarding is switched on for the bridge alone (a pod's packet to a
 * ClusterIP is routed back onto the bridge), and the table drops whatever would leave from it through another
 * interface. The cluster writes this plan to `<dataDir>/network/pod-network.json` at start and removes the bridge
 * (its route and forwarding go with it), the table, every namespace named with its tag and the IPAM state at stop,
 * and at the next start after a crash.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { ensureHostTools, type HostTool } from "@kvt/images";
import { runNft } from "../proxy/nft.ts";
import { deleteTableScript, type ProxyNetwork, renderRuleset } from "../proxy/nft-ruleset.ts";

const exec = promisify(execFile);

/** Where Debian's containernetworking-plugins puts the plugins. */
export const DEBIAN_CNI_BIN_DIR = "/usr/lib/cni";

/** The Debian programs the pod network and access to its VMs need (installed with apt-get when missing and root). */
export const POD_NETWORK_TOOLS: readonly HostTool[] = [
  { bin: `${DEBIAN_CNI_BIN_DIR}/bridge`, pkg: "containernetworking-plugins" },
  { bin: `${DEBIAN_CNI_BIN_DIR}/host-local`, pkg: "containernetworking-plugins" },
  { bin: `${DEBIAN_CNI_BIN_DIR}/loopback`, pkg: "containernetworking-plugins" },
  { bin: `${DEBIAN_CNI_BIN_DIR}/portmap`, pkg: "containernetworking-plugins" },
  { bin: "iptables", pkg: "iptables" }, // portmap's hostPort rules
  { bin: "ip", pkg: "iproute2" },
  { bin: "nsenter", pkg: "util-linux" },
  // The launchers' masquerade binding (KubeVirt's nftables NAT inside each launcher pod).
  { bin: "nft", pkg: "nftables" },
  // The service proxy clears the flows of endpoints that stopped serving (a live-migrated VM's old pod).
  { bin: "conntrack", pkg: "conntrack" },
  // `virtctl ssh` and `virtctl scp` wrap the local OpenSSH client, as KubeVirt's virtctl does.
  { bin: "ssh", pkg: "openssh-client" },
];

/** The plan a kubelet reads (`--pod-network FILE`). */
export interface PodNetworkConfig {
  /** The bridge's name (at most 15 bytes). */
  readonly bridge: string;
  /** The cluster's pod CIDR, an IPv4 /16. */
  readonly clusterCidr: string;
  /** The bridge's address: every pod's gateway. */
  readonly gateway: string;
  /** The Services' ClusterIP range, an IPv4 /16 (the API server's --service-cluster-ip-range). */
  readonly serviceCidr?: string;
  /** Each node's range (its podCIDR, a /24 of clusterCidr). */
  readonly nodeCidrs: Readonly<Record<string, string>>;
  /** Network namespaces of this cluster are named `<netnsPrefix><pod uid>`. */
  readonly netnsPrefix: string;
  readonly cniBinDir: string;
  /** host-local's reservations and the cached ADD results live here. */
  readonly stateDir: string;
}

/** The tag naming this data directory's bridge and namespaces (stable across restarts). */
export function clusterNetworkTag(dataDir: string): string {
  return createHash("sha256").update(resolve(dataDir)).digest("hex").slice(0, 6);
}

/** True when the IPv4 prefixes `a` and `b` (CIDR) overlap. */
export function cidrsOverlap(a: string, b: string): boolean {
  const [an, al] = parseCidr(a);
  const [bn, bl] = parseCidr(b);
  const len = Math.min(al, bl);
  const mask = len === 0 ? 0 : (0xffffffff << (32 - len)) >>> 0;
  return (an & mask) >>> 0 === (bn & mask) >>> 0;
}

function parseCidr(cidr: string): [number, number] {
  const [ip, len] = cidr.includes("/") ? cidr.split("/") : [cidr, "32"];
  const parts = ip.split(".").map(Number);
  if (parts.length !== 4 || parts.some((p) => !Number.isInteger(p) || p < 0 || p > 255))
    throw new TypeError(`"${cidr}" is not an IPv4 CIDR`);
  return [((parts[0] << 24) | (parts[1] << 16) | (parts[2] << 8) | parts[3]) >>> 0, Number(len)];
}

/**
 * Picks this cluster's /16 (pure): `10.N.0.0/16` with N from 64 to 127, starting at the tag's hash so that
 * clusters of different data directories start apart, skipping every prefix that overlaps `inUse` (the host's
 * routes, other clusters' bridges and service ranges). Node i gets `10.N.i+1.0/24`; Services get `10.N+64.0.0/16`.
 */
export function planPodNetwork(
  dataDir: string,
  nodeNames: readonly string[],
  inUse: readonly string[],
  cniBinDir = DEBIAN_CNI_BIN_DIR,
): PodNetworkConfig {
  if (nodeNames.length > 250) throw new RangeError(`${nodeNames.length} nodes do not fit a /16 of /24s`);
  const tag = clusterNetworkTag(dataDir);
  const start = Number.parseInt(tag.slice(0, 4), 16) % 64;
  for (let i = 0; i < 64; i++) {
    const n = 64 + ((start + i) % 64);
    const clusterCidr = `10.${n}.0.0/16`;
    const serviceCidr = `10.${n + 64}.0.0/16`;
    if (inUse.some((r) => cidrsOverlap(r, clusterCidr) || cidrsOverlap(r, serviceCidr))) continue;
    return {
      bridge: `kvt-${tag}`,
      clusterCidr,
      serviceCidr,
      gateway: `10.${n}.0.1`,
      nodeCidrs: Object.fromEntries(nodeNames.map((node, k) => [node, `10.${n}.${k + 1}.0/24`])),
      netnsPrefix: `kvt-${tag}-`,
      cniBinDir,
      stateDir: join(resolve(dataDir), "network"),
    };
  }
  throw new RangeError("no free /16 in 10.64.0.0/10 for the pod network");
}

/** The IPv4 prefixes the host uses now (routes of every table), except `ownBridge`'s. */
export async function prefixesInUse(ownBridge: string): Promise<string[]> {
  const { stdout } = await exec("ip", ["-j", "-4", "route", "show", "table", "all"]);
  const routes = JSON.parse(stdout) as { dst?: string; dev?: string }[];
  return routes
    .filter((r) => r.dev !== ownBridge && r.dst && r.dst !== "default" && /^\d/.test(r.dst))
    .map((r) => r.dst!);
}

/** The plan file of a data directory. */
export function podNetworkFile(dataDir: string): string {
  return join(resolve(dataDir), "network", "pod-network.json");
}

/**
 * Creates the pod network of the cluster in `dataDir`: first removes what a previous run left (a crash), installs
 * the plugins when missing, creates the bridge with the gateway address, writes the plan file and returns it.
 */
export async function createPodNetwork(
  dataDir: string,
  nodeNames: readonly string[],
  log: (line: string) => void,
): Promise<PodNetworkConfig> {
  await ensureHostTools(POD_NETWORK_TOOLS, log);
  const file = podNetworkFile(dataDir);
  if (existsSync(file)) await removePodNetwork(readPodNetworkFile(file));
  const tag = clusterNetworkTag(dataDir);
  const config = planPodNetwork(dataDir, nodeNames, await prefixesInUse(`kvt-${tag}`));
  // Leftovers of a run whose plan file was lost: the names carry this data directory's tag.
  await removePodNetwork(config);
  mkdirSync(config.stateDir, { recursive: true });
  const prefixLength = config.clusterCidr.split("/")[1];
  await exec("ip", ["link", "add", "name", config.bridge, "type", "bridge"]);
  await exec("ip", ["addr", "add", `${config.gateway}/${prefixLength}`, "dev", config.bridge]);
  await exec("ip", ["link", "set", config.bridge, "up"]);
  const services = proxyNetworkOf(config);
  if (services) {
    await exec("ip", ["route", "add", services.serviceCidr, "dev", config.bridge, "src", config.gateway]);
    // The table first (it drops whatever would leave the bridge elsewhere), then forwarding for the bridge alone.
    await runNft(renderRuleset(services, []));
    writeFileSync(`/proc/sys/net/ipv4/conf/${config.bridge}/forwarding`, "1");
  }
  writeFileSync(file, `${JSON.stringify(config, null, 2)}\n`);
  return config;
}

/** What the service proxy's rules need from a plan, or undefined when the plan has no service range. */
export function proxyNetworkOf(config: PodNetworkConfig): ProxyNetwork | undefined {
  if (!config.serviceCidr) return undefined;
  return {
    table: config.bridge,
    bridge: config.bridge,
    clusterCidr: config.clusterCidr,
    serviceCidr: config.serviceCidr,
  };
}

/** Reads a plan file; a TypeError names what is wrong. */
export function readPodNetworkFile(file: string): PodNetworkConfig {
  const c = JSON.parse(readFileSync(file, "utf8")) as PodNetworkConfig;
  for (const k of ["bridge", "clusterCidr", "gateway", "netnsPrefix", "cniBinDir", "stateDir"] as const) {
    if (typeof c[k] !== "string" || c[k] === "") throw new TypeError(`${file}: "${k}" must be a non-empty string`);
  }
  if (!/^kvt-[0-9a-f]{6}$/.test(c.bridge) || !/^kvt-[0-9a-f]{6}-$/.test(c.netnsPrefix))
    throw new TypeError(`${file}: bridge and netnsPrefix must be this cluster's kvt-<tag> names`);
  parseCidr(c.clusterCidr);
  if (c.serviceCidr !== undefined) parseCidr(c.serviceCidr);
  return c;
}

/**
 * Removes the pod network: the processes still in its namespaces (a crashed kubelet's containers), the
 * namespaces, the service proxy's table, the bridge and whatever is still enslaved to it, and the IPAM state.
 * Idempotent.
 */
export async function removePodNetwork(config: PodNetworkConfig): Promise<void> {
  await runNft(deleteTableScript(config.bridge)).catch(() => undefined); // never made, or removed already
  for (const ns of await namespacesWithPrefix(config.netnsPrefix)) {
    const pids = await exec("ip", ["netns", "pids", ns]).then(
      (r) => r.stdout.split(/\s+/).filter(Boolean).map(Number),
      () => [] as number[],
    );
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // Gone meanwhile: nothing to stop.
      }
    }
    await exec("ip", ["netns", "delete", ns]).catch(() => undefined); // gone meanwhile
  }
  if (await linkExists(config.bridge)) {
    const { stdout } = await exec("ip", ["-j", "link", "show", "master", config.bridge]);
    for (const port of JSON.parse(stdout || "[]") as { ifname: string }[]) {
      await exec("ip", ["link", "delete", port.ifname]).catch(() => undefined); // its netns went and took it
    }
    await exec("ip", ["link", "delete", config.bridge]);
  }
  rmSync(join(config.stateDir, "ipam"), { recursive: true, force: true });
  rmSync(join(config.stateDir, "pods"), { recursive: true, force: true });
  await removeIdlePortmapChains();
}

/**
 * portmap's host-wide chains (made at the first hostPort, kept by its DEL): removed with their jump rules once no
 * pod of any cluster on this machine maps a port any more (CNI-HOSTPORT-DNAT is empty), so a stopped cluster leaves
 * no rule behind and a running one keeps its hostPorts.
 */
export async function removeIdlePortmapChains(): Promise<void> {
  const rules = await exec("iptables", ["-t", "nat", "-S"]).then(
    (r) => r.stdout.split("\n"),
    () => [] as string[],
  );
  if (!rules.includes("-N CNI-HOSTPORT-DNAT")) return;
  if (rules.some((r) => r.startsWith("-A CNI-HOSTPORT-DNAT "))) return; // some pod still maps a port
  for (const rule of rules.filter((r) =>
    /^-A (PREROUTING|OUTPUT|POSTROUTING) .*-j CNI-HOSTPORT-(DNAT|MASQ)$/.test(r),
  )) {
    await exec("iptables", ["-t", "nat", "-D", ...splitRule(rule.slice(3))]).catch(() => undefined); // gone meanwhile
  }
  for (const chain of ["CNI-HOSTPORT-DNAT", "CNI-HOSTPORT-MASQ", "CNI-HOSTPORT-SETMARK"]) {
    await exec("iptables", ["-t", "nat", "-F", chain]).catch(() => undefined);
    await exec("iptables", ["-t", "nat", "-X", chain]).catch(() => undefined); // another cluster re-used it
  }
}

/** An iptables -S rule's words, with its quoted comment kept as one argument. */
function splitRule(rule: string): string[] {
  return [...rule.matchAll(/"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? m[2]);
}

/** The network namespaces (named, under /run/netns) whose names start with `prefix`. */
export async function namespacesWithPrefix(prefix: string): Promise<string[]> {
  const { stdout } = await exec("ip", ["netns", "list"]);
  return stdout
    .split("\n")
    .map((l) => l.split(" ")[0])
    .filter((n) => n?.startsWith(prefix));
}

/** True when a network interface `name` exists in this namespace. */
export async function linkExists(name: string): Promise<boolean> {
  return exec("ip", ["link", "show", "dev", name]).then(
    () => true,
    () => false,
  );
}
