/**
 * A process-kubelet killed with SIGKILL and started again adopts the containers it started (never a second copy),
 * learns how those that ended meanwhile ended, and ends those whose pod went away meanwhile, removing the pod's
 * directory with its emptyDir volumes (the launcher's socket is in one, at kubelet's emptyDir path). The first kubelet runs in its own process (testdata/run-node.ts) so it can be
 * killed for real; the second runs in this process. The containers are testdata/stand-in-launcher.ts.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CORE_V1, kubeConfigFromFile, type ResourceClient, RestClient, resourceClient } from "@kvt/kube";
import { pino } from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "../apiserver/apiserver.ts";
import { eventually } from "../apiserver/extensions/testdata/fixtures.ts";
import { currentRuntimeName, jsRuntime } from "../cluster/js-runtime.ts";
import type { V1Pod } from "../cluster/kube-models.ts";
import { type NodeAgent, startNodeAgent } from "./node-agent.ts";
import { podsLinkPath } from "./pods-link.ts";

const STAND_IN = new URL("./testdata/stand-in-launcher.ts", import.meta.url).pathname;
const RUN_NODE = new URL("./testdata/run-node.ts", import.meta.url).pathname;
const NODE = "node01";
let dir: string;
let dataDir: string;
let api: ApiServerHandle;
let transport: RestClient;
let pods: ResourceClient<V1Pod>;
let first: ChildProcess | undefined;
let second: NodeAgent | undefined;

/** The pids of the stand-in launchers of pod `uid` (the programs whose environment carries its POD_UID). */
function launchers(uid: string): number[] {
  const found = new Map<number, number>(); // pid -> parent pid
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0");
      // The program itself, not the kubelet's shim (`/bin/sh -c ... node stand-in-launcher.ts`).
      if (argv[0] === "/bin/sh" || !argv.some((a) => a.endsWith("stand-in-launcher.ts"))) continue;
      if (!readFileSync(`/proc/${entry}/environ`, "utf8").split("\0").includes(`POD_UID=${uid}`)) continue;
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      found.set(Number(entry), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]));
    } catch {
      // The process ended while we looked.
    }
  }
  // A stand-in's guest caught between fork and exec still shows the stand-in's command line: not a launcher.
  return [...found].filter(([, ppid]) => !found.has(ppid)).map(([pid]) => pid);
}

/** A child process of `pid` (by field 4 of /proc/<pid>/stat), if it has one. */
function childOf(pid: number): number | undefined {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === pid) return Number(entry);
    } catch {
      // The process ended while we looked.
    }
  }
  return undefined;
}

async function startFirstKubelet(): Promise<void> {
  const runtime = jsRuntime(currentRuntimeName(), dir); // Deno needs `run -A`
  first = spawn(runtime.execPath, [...runtime.execArgs, RUN_NODE, api.kubeconfigPath, dataDir, NODE, STAND_IN], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const child = first;
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on("data", (b: Buffer) => (b.toString().includes("ready") ? resolve() : undefined));
    child.once("exit", (code) => reject(new Error(`run-node exited with ${code}`)));
  });
}

async function killFirstKubelet(): Promise<void> {
  const child = first;
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once("exit", r));
  child.kill("SIGKILL");
  await exited;
}

async function startSecondKubelet(): Promise<void> {
  const runtime = jsRuntime(currentRuntimeName(), dir);
  second = await startNodeAgent({
    nodeName: NODE,
    transport,
    dataDir,
    layout: {
      projectRoot: dir,
      execPath: runtime.execPath,
      execArgs: runtime.execArgs,
      launcherEntry: STAND_IN,
    },
    log: pino({ level: "silent" }),
  });
}

const podOf = (name: string): V1Pod => ({
  metadata: { name, namespace: "default", labels: { "kubevirt.io/created-by": `vmi-of-${name}` } },
  spec: {
    nodeName: NODE,
    terminationGracePeriodSeconds: 5,
    volumes: [{ name: "sockets", emptyDir: {} }],
    containers: [
      {
        name: "compute",
        image: "kubevirt/virt-launcher",
        command: ["/usr/bin/virt-launcher-monitor"],
        volumeMounts: [{ name: "sockets", mountPath: "/var/run/kubevirt/sockets" }],
      },
    ],
  },
});

/** Pod `uid`'s launcher socket: in its `sockets` emptyDir, in the kubelet's layout under its pods directory. */
const socketOf = (uid: string): string =>
  join(dataDir, "pods", uid, "volumes", "kubernetes.io~empty-dir", "sockets", "launcher-sock");

async function runningPod(name: string): Promise<V1Pod> {
  await pods.create(podOf(name));
  const pod = await eventually(`pod ${name} to run`, async () => {
    const p = await pods.get("default", name);
    return p.status?.phase === "Running" ? p : undefined;
  });
  const uid = pod.metadata!.uid!;
  await eventually("its launcher to listen", async () => (existsSync(socketOf(uid)) ? true : undefined));
  return pod;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "kvt-kubelet-restart-"));
  api = await startApiServer({ inMemory: true, storageDir: join(dir, "storage"), logger: pino({ level: "silent" }) });
  transport = new RestClient(kubeConfigFromFile(api.kubeconfigPath));
  pods = resourceClient<V1Pod>(transport, CORE_V1.pods);
}, 60_000);

afterEach(async () => {
  await killFirstKubelet();
  await second?.stop();
  second = undefined;
});

afterAll(async () => {
  await api?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("a process-kubelet restarted after SIGKILL", () => {
  it("adopts the running launcher instead of starting a second one, then stops it when the pod is deleted", async () => {
    dataDir = join(dir, "adopt");
    await startFirstKubelet();
    const pod = await runningPod("adopt");
    const uid = pod.metadata!.uid!;
    const [pid] = launchers(uid);
    expect(launchers(uid)).toHaveLength(1);
    // The launcher was told its emptyDir through the pods directory's short link (unix socket paths are short).
    const environ = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
    const mounts = environ.find((e) => e.startsWith("KVT_VOLUME_MOUNTS="))?.slice("KVT_VOLUME_MOUNTS=".length);
    expect(JSON.parse(mounts ?? "[]")).toEqual([
      {
        mountPath: "/var/run/kubevirt/sockets",
        hostPath: join(podsLinkPath(dataDir), uid, "volumes", "kubernetes.io~empty-dir", "sockets"),
        readOnly: false,
      },
    ]);

    await killFirstKubelet();
    await startSecondKubelet();
    // The old kubelet started a second launcher at once; give the new one time to (not) do the same.
    await new Promise((r) => setTimeout(r, 1500));
    expect(launchers(uid)).toEqual([pid]);
    const p = await pods.get("default", "adopt");
    expect(p.status?.phase).toBe("Running");
    expect(p.status?.containerStatuses?.[0]?.state?.running).toBeDefined();

    await pods.delete("default", "adopt");
    await eventually("the adopted launcher to end", async () => (launchers(uid).length === 0 ? true : undefined));
    await eventually("the pod, its directory and its socket to be gone", async () => {
      const left = await pods.list("default");
      if (left.items.some((x) => x.metadata?.name === "adopt")) return undefined;
      if (existsSync(join(dataDir, "pods", uid))) return undefined;
      return existsSync(socketOf(uid)) ? undefined : true;
    });
  }, 60_000);

  it("reports the exit code of a container that ended while it was down", async () => {
    dataDir = join(dir, "exited");
    await startFirstKubelet();
    const pod = await runningPod("exited");
    const uid = pod.metadata!.uid!;
    await killFirstKubelet();
    writeFileSync(join(dataDir, "pods", uid, "exit-now"), "0");
    await eventually("the launcher to exit", async () => (launchers(uid).length === 0 ? true : undefined));
    await startSecondKubelet();
    const done = await eventually("the pod to succeed", async () => {
      const p = await pods.get("default", "exited");
      return p.status?.phase === "Succeeded" ? p : undefined;
    });
    expect(done.status?.containerStatuses?.[0]?.state?.terminated).toMatchObject({ exitCode: 0, reason: "Completed" });
    expect(launchers(uid)).toHaveLength(0);
    await pods.delete("default", "exited", { gracePeriodSeconds: 0 });
  }, 60_000);

  it("removes the directory of a pod that had finished before the restart once the pod is deleted", async () => {
    dataDir = join(dir, "finished");
    await startFirstKubelet();
    const pod = await runningPod("finished");
    const uid = pod.metadata!.uid!;
    writeFileSync(join(dataDir, "pods", uid, "exit-now"), "0");
    await eventually("the pod to succeed", async () => {
      const p = await pods.get("default", "finished");
      return p.status?.phase === "Succeeded" ? true : undefined;
    });
    await killFirstKubelet();
    await startSecondKubelet();
    expect(existsSync(join(dataDir, "pods", uid))).toBe(true); // its logs stay while the pod exists
    await pods.delete("default", "finished", { gracePeriodSeconds: 0 });
    await eventually("its directory to be removed", async () =>
      existsSync(join(dataDir, "pods", uid)) ? undefined : true,
    );
  }, 60_000);

  it("ends the launcher (and its guest) of a pod deleted while it was down, and removes the pod's files", async () => {
    dataDir = join(dir, "orphan");
    await startFirstKubelet();
    const pod = await runningPod("orphan");
    const uid = pod.metadata!.uid!;
    const [pid] = launchers(uid);
    const guest = await eventually("the stand-in's guest", async () => childOf(pid));
    expect(guest).toBeGreaterThan(0);
    await killFirstKubelet();
    await pods.delete("default", "orphan", { gracePeriodSeconds: 0 });
    await startSecondKubelet();
    await eventually("the orphaned launcher and its guest to end", async () =>
      launchers(uid).length === 0 && !existsSync(`/proc/${guest}/stat`) ? true : undefined,
    );
    await eventually("its directory and socket to be removed", async () =>
      existsSync(join(dataDir, "pods", uid)) || existsSync(socketOf(uid)) ? undefined : true,
    );
  }, 60_000);
});
