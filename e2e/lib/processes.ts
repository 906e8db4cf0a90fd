/**
 * Finds the local cluster's processes on this machine, for the failure tests (kill -9 a launcher, a handler), and
 * follows a VMI's phase with `kubectl get -w` so a short-lived phase (Failed, before a VM replaces the VMI) is not
 * missed between polls.
 *
 *   launcher of pod P   the process whose working directory is <dataDir>/nodes/<node>/pods/<P uid> (the
 *                       process-kubelet starts every container there) and whose command runs virt-launcher (its
 *                       sources, or the node's bundle `virt-launcher.mjs`)
 *   virt-handler of N   the process whose command runs apps/virt-handler (sources or bundle) with `--node-name N` and a kubeconfig in
 *                       this cluster's data directory (its own service account's; another cluster on the machine
 *                       has another data directory)
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { processAlive, runsComponent } from "@kvt/local-cluster";

interface ProcessInfo {
  readonly pid: number;
  readonly argv: string[];
  readonly cwd: string;
}

function processes(): ProcessInfo[] {
  const out: ProcessInfo[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").filter(Boolean);
      out.push({ pid: Number(entry), argv, cwd: readlinkSync(`/proc/${entry}/cwd`) });
    } catch {
      // The process ended while we looked: skip it.
    }
  }
  return out;
}

/** The pid of the launcher running in the pod with uid `podUid`, or undefined when none runs. */
export function launcherPid(podUid: string): number | undefined {
  return processes().find(
    (p) =>
      p.cwd.endsWith(`/pods/${podUid}`) &&
      p.argv[0] !== "/bin/sh" && // the kubelet's shim runs the launcher: not the launcher itself
      // The kubelet runs its node's launcher bundle once built, the TypeScript sources before that.
      p.argv.some((a) => a.endsWith("virt-launcher/src/main.ts") || a.endsWith("/virt-launcher.mjs")),
  )?.pid;
}

/** The pid of the virt-handler of `node` in the cluster whose (admin) kubeconfig is `kubeconfig`, or undefined. */
export function handlerPid(kubeconfig: string, node: string): number | undefined {
  const flag = (argv: string[], name: string): string | undefined => argv[argv.indexOf(name) + 1];
  return processes().find(
    (p) =>
      runsComponent(p.argv, "apps/virt-handler/src/main.ts") &&
      flag(p.argv, "--node-name") === node &&
      dirname(flag(p.argv, "--kubeconfig") ?? "") === dirname(kubeconfig),
  )?.pid;
}

/**
 * The guest's serial console as the launcher writes it: `<vmi uid>/virt-serial0-log` in the launcher pod's `private`
 * emptyDir, `<dataDir>/nodes/<node>/pods/<podUid>/volumes/kubernetes.io~empty-dir/private` (the data directory is the
 * kubeconfig's). "" until it exists. The file `kubectl logs -c guest-console-log` follows, read directly: it works
 * whether or not the launcher pod has that container.
 */
export function consoleFile(kubeconfig: string, node: string, podUid: string): string {
  const pod = join(dirname(kubeconfig), "nodes", node, "pods", podUid);
  const dir = join(pod, "volumes", "kubernetes.io~empty-dir", "private");
  try {
    const vmi = readdirSync(dir).find((name) => existsSync(join(dir, name, "virt-serial0-log")));
    return vmi ? readFileSync(join(dir, vmi, "virt-serial0-log"), "utf8") : "";
  } catch {
    return "";
  }
}

/** The highest `kvt-guest progress n=N` the test guest printed in `consoleText`, or -1 before the first. */
export function guestProgress(consoleText: string): number {
  let max = -1;
  for (const m of consoleText.matchAll(/kvt-guest progress n=(\d+)/g)) max = Math.max(max, Number(m[1]));
  return max;
}

/** True while process `pid` exists (and is not a zombie). */
export const alive = processAlive;

/** One observed state of a VMI. */
export interface VmiObservation {
  readonly uid: string;
  readonly phase: string;
}

/** A running `kubectl get vmi NAME -w`: every state it printed, until stop(). */
export interface VmiWatcher {
  readonly seen: VmiObservation[];
  stop(): void;
}

/** Follows the VMI `name` with the real kubectl's watch, recording (uid, phase) of every event. */
export function watchVmi(kubeconfig: string, name: string): VmiWatcher {
  const seen: VmiObservation[] = [];
  const child: ChildProcess = spawn(
    "kubectl",
    ["get", "vmi", name, "-w", "-o", 'jsonpath={.metadata.uid} {.status.phase}{"\\n"}'],
    {
      env: { ...process.env, KUBECONFIG: kubeconfig, HOME: mkdtempSync(join(tmpdir(), "kvt-e2e-watch-")) },
      stdio: ["ignore", "pipe", "ignore"],
    },
  );
  let pending = "";
  child.stdout?.on("data", (d: Buffer) => {
    pending += d.toString();
    const lines = pending.split("\n");
    pending = lines.pop() ?? "";
    for (const line of lines) {
      const [uid, phase] = line.trim().split(" ");
      if (uid) seen.push({ uid, phase: phase ?? "" });
    }
  });
  return { seen, stop: () => void child.kill("SIGKILL") };
}
