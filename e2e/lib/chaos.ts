/**
 * What the chaos test looks at on this machine: the local cluster's component processes (to kill them), and the
 * guests of every VMI (to count them), from /proc.
 *
 *   component   a process whose command runs the component's entry point with an argument inside the cluster's
 *               data directory (its kubeconfig, data dir or socket dir), so another cluster is never touched
 *   launcher    a virt-launcher process (its sources or the node's bundle; not the kubelet's /bin/sh shim) whose
 *               working directory is <dataDir>/nodes/<node>/pods/<pod uid>; its VMI uid is its `--uid` argument
 *   guest       a launcher holding a KVM VM (a file descriptor `anon_inode:kvm-vm`: the native VMM), or a QEMU
 *               process that a launcher started
 */
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { runsComponent } from "@kvt/local-cluster";

/** One process as /proc shows it. */
interface Proc {
  readonly pid: number;
  readonly ppid: number;
  readonly argv: string[];
  readonly cwd: string;
}

function procs(): Proc[] {
  const out: Proc[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (fields[0] === "Z") continue; // exited, not reaped yet
      const argv = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").filter(Boolean);
      out.push({ pid: Number(entry), ppid: Number(fields[1]), argv, cwd: readlinkSync(`/proc/${entry}/cwd`) });
    } catch {
      // The process ended while we looked.
    }
  }
  return out;
}

/** The components the chaos test kills, by the entry point their command runs. */
export const COMPONENT_ENTRIES = {
  apiserver: "tools/local-cluster/src/apiserver/main.ts",
  scheduler: "tools/local-cluster/src/scheduler/main.ts",
  "process-kubelet": "tools/local-cluster/src/kubelet/main.ts",
  "virt-controller": "apps/virt-controller/src/main.ts",
  "virt-handler": "apps/virt-handler/src/main.ts",
} as const;

/** A component name of {@link COMPONENT_ENTRIES}. */
export type Component = keyof typeof COMPONENT_ENTRIES;

/** The pids of `component` in the cluster whose data directory is `dataDir`. */
export function componentPids(dataDir: string, component: Component): number[] {
  const entry = COMPONENT_ENTRIES[component];
  return procs()
    .filter(
      (p) =>
        p.argv[0] !== "/bin/sh" &&
        runsComponent(p.argv, entry) &&
        p.argv.some((a) => a.startsWith(`${dataDir}/`) || a.startsWith(`--kubeconfig=${dataDir}/`)),
    )
    .map((p) => p.pid);
}

/** One guest of a VMI. */
export interface Guest {
  readonly vmiUid: string;
  readonly node: string;
  readonly podUid: string;
  /** The process holding the guest: the launcher (native VMM) or its QEMU. */
  readonly pid: number;
  readonly launcherPid: number;
}

/** One launcher process. */
export interface LauncherProc {
  readonly pid: number;
  readonly vmiUid: string;
  readonly node: string;
  readonly podUid: string;
}

const isLauncher = (argv: readonly string[]): boolean =>
  argv[0] !== "/bin/sh" &&
  argv.some((a) => a.endsWith("virt-launcher/src/main.ts") || a.endsWith("/virt-launcher.mjs"));

/** The launchers and the guests of the cluster whose data directory is `dataDir`. */
export function launchersAndGuests(dataDir: string): { launchers: LauncherProc[]; guests: Guest[] } {
  const all = procs();
  const launchers: LauncherProc[] = [];
  const podDir = new RegExp(`^${dataDir.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}/nodes/([^/]+)/pods/([^/]+)$`);
  for (const p of all) {
    const m = podDir.exec(p.cwd);
    if (!m || !isLauncher(p.argv)) continue;
    const i = p.argv.indexOf("--uid");
    const vmiUid = i >= 0 ? p.argv[i + 1] : undefined;
    if (vmiUid) launchers.push({ pid: p.pid, vmiUid, node: m[1] ?? "", podUid: m[2] ?? "" });
  }
  const guests: Guest[] = [];
  for (const l of launchers) {
    const base = { vmiUid: l.vmiUid, node: l.node, podUid: l.podUid, launcherPid: l.pid };
    if (holdsKvmVm(l.pid)) guests.push({ ...base, pid: l.pid });
    for (const q of all) {
      if (q.ppid === l.pid && q.argv.some((a) => /qemu-system/.test(a))) guests.push({ ...base, pid: q.pid });
    }
  }
  return { launchers, guests };
}

function holdsKvmVm(pid: number): boolean {
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return false;
  }
  for (const fd of fds) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`) === "anon_inode:kvm-vm") return true;
    } catch {
      // Closed while we looked.
    }
  }
  return false;
}

/** A seeded PRNG (mulberry32): the same seed gives the same sequence, so a chaos run can be replayed. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
