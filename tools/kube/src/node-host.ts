/**
 * What a node leaves on the host besides its network namespace, and how `up` prepares it and `down` removes it:
 *
 *   cgroups   /sys/fs/cgroup/<controller>/kvtk-<tag>-<node>/...   the kubelet's cgroupRoot (kubepods, pods, containers);
 *             made in every v1 hierarchy by `up` (a cgroup v1 kubelet does not make its root), cpuset's cpus and
 *             mems copied from the parent (a new cpuset cgroup starts empty and takes no task)
 *   mounts    the node's mount namespace, bound at /run/kvtk-<tag>/<node>/mnt: made by `up` from the host's
 *             (private: nothing propagates either way), with <cluster-dir>/nodes/<node>/kubelet bound at
 *             /var/lib/kubelet in it. Every mount of the kubelet and containerd (volumes, rootfs overlays, shm,
 *             pod network namespaces) is made in it, and goes with it once its processes are gone and the bind is
 *             unmounted. /var/lib/kubelet is made on the host as an empty mount point when missing.
 *   processes the pods' (in the cgroups) and the runc shims' (in the node's network namespace, like containerd and
 *             the kubelet)
 *   files     the kubelet's links in /var/log/containers into the node's pod logs, and libcni's cached results
 *             /var/lib/cni/results/kvtk-<tag>-<sandbox>-eth0 and cni-loopback-<sandbox>-lo
 *
 * `releaseNode` kills, unmounts and removes all of it, in that order, and is idempotent.
 */
import { execFile } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { waitFor } from "@kvt/local-cluster";
import { type ClusterNetwork, NAME_PREFIX, type NodeNetwork } from "./node-network.ts";

const exec = promisify(execFile);

/** Where the node's kubelet directory is bound inside its mount namespace (node-config.ts's KUBELET_ROOT). */
const KUBELET_MOUNT_POINT = "/var/lib/kubelet";
/** Where the cgroup hierarchies are mounted. */
const CGROUP_MOUNT_ROOT = "/sys/fs/cgroup";
/** The kubelet's links to container logs (not configurable in the kubelet). */
const CONTAINER_LOG_LINKS = "/var/log/containers";
/** libcni's result cache (containerd does not configure another). */
const CNI_RESULTS = "/var/lib/cni/results";

/** A mount point from /proc/self/mountinfo: its path and filesystem type. */
export interface MountPoint {
  readonly path: string;
  readonly fsType: string;
}

/** Parses /proc/self/mountinfo text (pure): mount points with their octal escapes (`\040`) decoded. */
export function parseMountInfo(text: string): MountPoint[] {
  const decode = (s: string): string =>
    s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8)));
  const mounts: MountPoint[] = [];
  for (const line of text.split("\n")) {
    const fields = line.split(" ");
    const dash = fields.indexOf("-");
    if (fields.length < 10 || dash < 0) continue;
    mounts.push({ path: decode(fields[4]), fsType: fields[dash + 1] });
  }
  return mounts;
}

/** The mount points at or under any of `dirs`, deepest (and latest) first: the order to unmount them in (pure). */
export function mountsUnder(mounts: readonly MountPoint[], dirs: readonly string[]): string[] {
  const inside = (p: string): boolean => dirs.some((d) => p === d || p.startsWith(`${d}/`));
  const paths = mounts.map((m) => m.path).filter(inside);
  return [...new Set(paths.reverse())].sort((a, b) => b.split("/").length - a.split("/").length);
}

/** The cgroup hierarchies' mount points (v1 controllers, named hierarchies and the hybrid unified one). */
export function cgroupHierarchies(mounts: readonly MountPoint[]): string[] {
  return mounts
    .filter((m) => (m.fsType === "cgroup" || m.fsType === "cgroup2") && m.path.startsWith(`${CGROUP_MOUNT_ROOT}/`))
    .map((m) => m.path);
}

function readMounts(): MountPoint[] {
  return parseMountInfo(readFileSync("/proc/self/mountinfo", "utf8"));
}

/** A node's cgroupRoot (the kubelet's `cgroupRoot`), e.g. `/kvtk-1a2b3c-node01`. */
export function nodeCgroupRoot(net: Pick<ClusterNetwork, "bridge">, node: Pick<NodeNetwork, "name">): string {
  return `/${net.bridge}-${node.name}`;
}

/** The node's directory under /run: containerd's state and sockets, runc's state, the shims' sockets. */
export function nodeRunDir(net: Pick<ClusterNetwork, "bridge">, node: Pick<NodeNetwork, "name">): string {
  return join("/run", net.bridge, node.name);
}

/** Makes the node's cgroupRoot in every v1 hierarchy (cpuset's cpus and mems from its parent). */
export function createNodeCgroups(cgroupRoot: string): void {
  for (const hierarchy of cgroupHierarchies(readMounts())) {
    const dir = join(hierarchy, cgroupRoot);
    mkdirSync(dir, { recursive: true });
    if (existsSync(join(dir, "cpuset.cpus"))) {
      for (const f of ["cpuset.cpus", "cpuset.mems"]) copyFileSync(join(hierarchy, f), join(dir, f));
    }
  }
}

/**
 * Makes the node's mount namespace, bound at `nsFile` (a private copy of the host's), with `kubeletDir` bound at
 * /var/lib/kubelet inside it.
 */
export async function createNodeMountNamespace(nsFile: string, kubeletDir: string): Promise<void> {
  mkdirSync(KUBELET_MOUNT_POINT, { recursive: true });
  mkdirSync(dirname(nsFile), { recursive: true });
  writeFileSync(nsFile, "");
  await exec("unshare", [`--mount=${nsFile}`, "--propagation", "private", "true"]);
  await exec("nsenter", [`--mount=${nsFile}`, "--", "mount", "--bind", kubeletDir, KUBELET_MOUNT_POINT]);
}

/** The pids in `dir`'s cgroup and every cgroup below it. */
function cgroupPids(dir: string): number[] {
  if (!existsSync(dir)) return [];
  const pids: number[] = [];
  const walk = (d: string): void => {
    const procs = join(d, "cgroup.procs");
    if (existsSync(procs)) pids.push(...readFileSync(procs, "utf8").split("\n").filter(Boolean).map(Number));
    for (const e of readdirSync(d, { withFileTypes: true })) if (e.isDirectory()) walk(join(d, e.name));
  };
  walk(dir);
  return pids;
}

/** Removes `dir`'s cgroup and every cgroup below it, deepest first (each must be empty of tasks). */
function removeCgroupTree(dir: string): void {
  if (!existsSync(dir)) return;
  for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) removeCgroupTree(join(dir, e.name));
  rmdirSync(dir);
}

function killAll(pids: readonly number[]): void {
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // Exited meanwhile: nothing to kill.
    }
  }
}

/** The pids whose network namespace is `netns` (`ip netns pids`); none when it does not exist. */
async function netnsPids(netns: string): Promise<number[]> {
  return await exec("ip", ["netns", "pids", netns]).then(
    (r) => r.stdout.split(/\s+/).filter(Boolean).map(Number),
    () => [],
  );
}

/**
 * Removes what `node` left on the host (see the module comment): kills its pods and shims, unmounts everything
 * under its directories, removes its cgroups, its /run directory, its log links and cached CNI results. The
 * kubelet and containerd must be stopped already (the supervisor's `down`); the namespace itself goes with the
 * network (node-network.ts).
 */
export async function releaseNode(
  net: Pick<ClusterNetwork, "bridge">,
  node: NodeNetwork,
  nodeDir: string,
): Promise<void> {
  const hierarchies = cgroupHierarchies(readMounts());
  const cgroupDirs = hierarchies.map((h) => join(h, nodeCgroupRoot(net, node)));
  const leftovers = async (): Promise<number[]> => [
    ...new Set([...cgroupDirs.flatMap(cgroupPids), ...(await netnsPids(node.netns))]),
  ];
  await waitFor(
    `${node.name}'s pods and shims to exit`,
    async () => {
      const pids = (await leftovers()).filter((p) => p !== process.pid);
      killAll(pids);
      return pids.length === 0;
    },
    20_000,
    200,
  );

  const runDir = nodeRunDir(net, node);
  for (let pass = 0; pass < 5; pass++) {
    const targets = mountsUnder(readMounts(), [nodeDir, runDir]);
    if (targets.length === 0) break;
    for (const target of targets) await exec("umount", ["-l", target]).catch(() => undefined); // gone with a parent
  }
  const stuck = mountsUnder(readMounts(), [nodeDir, runDir]);
  if (stuck.length > 0) throw new Error(`cannot unmount ${stuck.join(", ")}`);

  // A cgroup is gone from its hierarchy once its last task has been reaped: retry briefly.
  await waitFor(
    `${node.name}'s cgroups to be removed`,
    () => {
      try {
        for (const dir of cgroupDirs) removeCgroupTree(dir);
        return true;
      } catch {
        return false;
      }
    },
    10_000,
    200,
  );
  rmSync(runDir, { recursive: true, force: true });
  removeLinksInto(CONTAINER_LOG_LINKS, nodeDir);
  removeCniResults(CNI_RESULTS, net.bridge);
}

/**
 * Removes libcni's cached results of the network `network`'s sandboxes (`<network>-<sandbox>-eth0`) and of the
 * loopback network containerd attaches the same sandboxes to (`cni-loopback-<sandbox>-lo`).
 */
export function removeCniResults(dir: string, network: string): void {
  if (!existsSync(dir)) return;
  const files = readdirSync(dir);
  const sandboxes = new Set(
    files.flatMap((f) => {
      const m = new RegExp(`^${network}-([0-9a-f]{64})-`).exec(f);
      return m ? [m[1]] : [];
    }),
  );
  for (const f of files) {
    const loopback = /^cni-loopback-([0-9a-f]{64})-lo$/.exec(f);
    if (f.startsWith(`${network}-`) || (loopback && sandboxes.has(loopback[1]))) rmSync(join(dir, f), { force: true });
  }
}

/** Removes the symlinks in `dir` that point into `target`. */
function removeLinksInto(dir: string, target: string): void {
  if (!existsSync(dir) || !statSync(dir).isDirectory()) return;
  for (const f of readdirSync(dir)) {
    const path = join(dir, f);
    try {
      if (readlinkSync(path).startsWith(`${target}/`)) rmSync(path, { force: true });
    } catch {
      // Not a link: not ours.
    }
  }
}

/**
 * Removes /run/kvtk-<tag> once every node's directory in it is gone, and the host's empty /var/lib/kubelet mount
 * point once no cluster's nodes are left on this machine (no /run/kvtk-* directory).
 */
export function removeClusterRunDir(net: Pick<ClusterNetwork, "bridge">): void {
  const dir = join("/run", net.bridge);
  if (existsSync(dir) && readdirSync(dir).length === 0) rmdirSync(dir);
  const clustersLeft = readdirSync("/run").some((d) => d.startsWith(NAME_PREFIX));
  if (!clustersLeft && existsSync(KUBELET_MOUNT_POINT) && readdirSync(KUBELET_MOUNT_POINT).length === 0) {
    rmdirSync(KUBELET_MOUNT_POINT);
  }
}
