/**
 * `npm run bench -- density [--vmis N] [--interval-ms MS] [--memory 64Mi] [--guest-args ARGS] [--keep] [--nested]`:
 * (`--nested`: the whole case inside the nested lane's L1, on our VMM on a nested KVM, 10 VMIs by default) KubeVirt's
 * density test on the local cluster. Starts a cluster in a temporary data directory, creates N VirtualMachineInstances
 * of the test guest (native VMM; idle by default: `pattern=idle`) `interval-ms` apart, and times each from its create call to the watch event that shows phase
 * Running (this client's clock: status timestamps have one-second resolution). Then reads the resident memory of
 * every launcher process (VmRSS in /proc/<pid>/status; the pid is found through the pod's directory, the launcher's
 * working directory), deletes everything and stops the cluster.
 *
 * Besides P50/P95 it breaks the time down by stage, all seen by this client's own watches:
 *
 *   create --controller--> pod ADDED --scheduler--> pod bound --kubelet--> pod Running (launcher process spawned)
 *     --controller--> VMI Scheduled --launcher start + handler sync + VMM start + status write--> VMI Running
 *
 * Prints a table and, last, one JSON line:
 *   {"area":"density","lane":"host"|"nested","backend":"native"|"qemu","vmis":..,"p50Seconds":..,"p95Seconds":..,"launcherRssBytesMedian":..}
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { registerTestGuest } from "@kvt/images";
import {
  CORE_V1,
  KUBEVIRT_V1,
  type KubeObject,
  type RawWatchEvent,
  type ResourceClient,
  RestClient,
  type RestTransport,
  resourceClient,
  resourcePath,
  type WatchHandle,
} from "@kvt/kube";
import { benchLane, testGuestPath } from "@kvt/vmm";
import { type LocalCluster, startLocalCluster } from "../src/index.ts";

const { values } = parseArgs({
  options: {
    vmis: { type: "string", default: "100" },
    "interval-ms": { type: "string", default: "100" },
    memory: { type: "string", default: "64Mi" },
    "timeout-s": { type: "string", default: "600" },
    keep: { type: "boolean", default: false },
    "node-cpus": { type: "string" },
    "guest-args": { type: "string", default: "pattern=idle ws=1 tick=1000" },
  },
});
// Inside the nested lane's L1 (`npm run bench -- density --nested`): the project is read-only there, so the image
// store goes to /tmp, and L1's one emulated CPU takes 10 VMIs unless told otherwise.
const nested = benchLane() === "nested";
if (nested) process.env.KVT_IMAGE_STORE ??= mkdtempSync(join(tmpdir(), "kvt-density-images-"));
const COUNT = Number(nested && !process.argv.includes("--vmis") ? "10" : values.vmis);
const INTERVAL_MS = Number(values["interval-ms"]);
const TIMEOUT_MS = Number(values["timeout-s"]) * 1000;
/** Each launcher pod requests 100m CPU: give the 2 nodes room for all of them (and the rest of the pod). */
const NODE_CPUS = Number(values["node-cpus"] ?? Math.max(cpus().length, Math.ceil((COUNT * 0.1) / 2) + 1));
const NAMESPACE = "default";
const LABEL = "kvt.bench/density";
const root = new URL("../../../", import.meta.url).pathname;

/** What this client saw of one VMI, in ms on its own clock. */
interface Timeline {
  readonly name: string;
  created: number;
  uid?: string;
  podAdded?: number;
  podBound?: number;
  podRunning?: number;
  scheduled?: number;
  running?: number;
  failed?: string;
  node?: string;
  /** The machine backend that ran it: "qemu" when the VMI carries SoftwareEmulation=True, else "native". */
  backend?: "native" | "qemu";
}

interface VmiEvent extends KubeObject {
  status?: { phase?: string; nodeName?: string; reason?: string; conditions?: { type: string; status: string }[] };
}
interface PodEvent extends KubeObject {
  spec?: { nodeName?: string };
  status?: { phase?: string };
}

const log = (line: string): void => void process.stdout.write(`[density] ${line}\n`);

function vmiManifest(name: string): VmiEvent & { spec: unknown } {
  return {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachineInstance",
    metadata: { name, namespace: NAMESPACE, labels: { [LABEL]: "true" } },
    spec: {
      domain: {
        devices: { disks: [{ name: "containerdisk", disk: { bus: "virtio" } }] },
        resources: { requests: { memory: values.memory } },
        // The guest at rest: one console line a second, asleep in the VMM in between (a density test measures
        // the platform, not a workload: KubeVirt's uses an idle cirros). `--guest-args` runs another workload.
        firmware: {
          kernelBoot: {
            kernelArgs: values["guest-args"],
            container: { image: "local/test-guest:latest", kernelPath: "/test-guest.elf" },
          },
        },
      },
      terminationGracePeriodSeconds: 0,
      volumes: [{ name: "containerdisk", containerDisk: { image: "local/test-guest:latest" } }],
    },
  };
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

function sortedOf(xs: readonly (number | undefined)[]): number[] {
  return xs.filter((x): x is number => x !== undefined && Number.isFinite(x)).sort((a, b) => a - b);
}

/** Follows VMIs and launcher pods with this client's own watches, stamping each stage as it is first seen. */
async function watchTimelines(transport: RestTransport, byName: Map<string, Timeline>): Promise<WatchHandle[]> {
  const byUid = new Map<string, Timeline>();
  const stamp = (t: Timeline, key: "podAdded" | "podBound" | "podRunning" | "scheduled" | "running"): void => {
    t[key] ??= performance.now();
  };
  const onError = (what: string) => (err: unknown) => {
    if (err) log(`${what} watch ended: ${(err as Error).message ?? JSON.stringify(err)}`);
  };
  const objectOf =
    <T>(handle: (obj: T) => void) =>
    (event: RawWatchEvent): void => {
      if (event.type !== "BOOKMARK" && event.type !== "ERROR") handle(event.object as T);
    };
  const vmis = await transport.watch(
    resourcePath(KUBEVIRT_V1.virtualMachineInstances, NAMESPACE),
    { labelSelector: LABEL },
    objectOf((obj: VmiEvent) => {
      const t = byName.get(obj.metadata?.name ?? "");
      if (!t) return;
      if (obj.metadata?.uid && !t.uid) {
        t.uid = obj.metadata.uid;
        byUid.set(t.uid, t);
      }
      const phase = obj.status?.phase;
      if (phase === "Scheduled" || phase === "Running") stamp(t, "scheduled");
      if (phase === "Running") {
        stamp(t, "running");
        t.node = obj.status?.nodeName;
        const emulated = obj.status?.conditions?.some((c) => c.type === "SoftwareEmulation" && c.status === "True");
        t.backend = emulated ? "qemu" : "native";
      }
      if (phase === "Failed" && !t.failed) t.failed = obj.status?.reason ?? "Failed";
    }),
    onError("VMI"),
  );
  const pods = await transport.watch(
    resourcePath(CORE_V1.pods, NAMESPACE),
    { labelSelector: "kubevirt.io/created-by" },
    objectOf((obj: PodEvent) => {
      const vmiUid = obj.metadata?.labels?.["kubevirt.io/created-by"] ?? "";
      const t = byUid.get(vmiUid) ?? [...byName.values()].find((x) => x.uid === vmiUid);
      if (!t) return;
      stamp(t, "podAdded");
      if (obj.spec?.nodeName) stamp(t, "podBound");
      if (obj.status?.phase === "Running") stamp(t, "podRunning");
    }),
    onError("pod"),
  );
  return [vmis, pods];
}

/** The pid of the launcher process running in pod `uid` on `node`: the process whose cwd is the pod's directory. */
function launcherPids(dataDir: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cwd = readlinkSync(`/proc/${entry}/cwd`);
      if (!cwd.startsWith(join(dataDir, "nodes"))) continue;
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, "utf8");
      if (!cmdline.includes("virt-launcher")) continue;
      const podUid = /\/pods\/([^/]+)$/.exec(cwd)?.[1];
      if (podUid) out.set(podUid, Number(entry));
    } catch {
      // The process ended while we looked, or is not ours to read: not a launcher of this cluster.
    }
  }
  return out;
}

/**
 * CPU seconds (user + system) used so far by each process of this cluster (its command line or working directory
 * names the data directory), keyed by pid, with the component it is: the figure load does not distort much.
 */
function clusterCpu(dataDir: string): Map<number, { component: string; seconds: number }> {
  const out = new Map<number, { component: string; seconds: number }>();
  const tick = 100; // USER_HZ on Linux
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, "utf8").replaceAll("\0", " ");
      let cwd = "";
      try {
        cwd = readlinkSync(`/proc/${entry}/cwd`);
      } catch {
        // not ours to read
      }
      if (!cmdline.includes(dataDir) && !cwd.startsWith(dataDir)) continue;
      const app = /(?:apps|tools\/local-cluster\/src)\/([a-z-]+)\//.exec(cmdline)?.[1] ?? cmdline.split(" ")[0];
      const component = cmdline.includes("virt-launcher") ? "virt-launcher (all)" : app;
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      out.set(Number(entry), { component, seconds: (Number(fields[11]) + Number(fields[12])) / tick });
    } catch {
      // exited while we looked
    }
  }
  return out;
}

/** CPU seconds per component between two {@link clusterCpu} samples (processes born in between count whole). */
function cpuBetween(
  before: Map<number, { component: string; seconds: number }>,
  after: Map<number, { component: string; seconds: number }>,
): Map<string, number> {
  const out = new Map<string, number>();
  for (const [pid, a] of after) {
    const used = a.seconds - (before.get(pid)?.seconds ?? 0);
    out.set(a.component, (out.get(a.component) ?? 0) + used);
  }
  return out;
}

/** Resident memory of one launcher, in bytes. */
interface LauncherMemory {
  /** VmRSS: everything resident, shared pages (the node binary, ~50 MiB) included. */
  readonly rss: number;
  /** Proportional set size: shared pages divided among the processes sharing them. */
  readonly pss: number;
  /** Resident part of the guest's RAM (the anonymous mapping of exactly the VMI's memory size). */
  readonly guest: number;
  /** RssAnon: private memory (JS heap, native heap, guest RAM), without the shared node binary and libraries. */
  readonly anon: number;
}

function memoryBytes(quantity: string): number {
  const m = /^(\d+)(Ki|Mi|Gi)?$/.exec(quantity);
  const unit = { Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3 }[m?.[2] ?? ""] ?? 1;
  return Number(m?.[1] ?? 0) * unit;
}

/** What /proc says about `pid`'s memory; undefined when it exited meanwhile. */
function memoryOf(pid: number, guestBytes: number): LauncherMemory | undefined {
  try {
    const kb = (text: string, key: string): number =>
      Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(text)?.[1] ?? 0) * 1024;
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
    let guest = 0;
    // smaps: a header line per mapping ("start-end perms offset dev inode [path]"), then "Key: N kB" lines.
    for (const mapping of readFileSync(`/proc/${pid}/smaps`, "utf8").split(/\n(?=[0-9a-f]+-[0-9a-f]+ )/)) {
      const anonymous = (mapping.split("\n")[0] ?? "").trim().split(/\s+/).length === 5;
      if (anonymous && kb(mapping, "Size") === guestBytes) guest = Math.max(guest, kb(mapping, "Rss"));
    }
    return { rss: kb(status, "VmRSS"), pss: kb(rollup, "Pss"), guest, anon: kb(status, "RssAnon") };
  } catch {
    return undefined; // exited meanwhile
  }
}

async function createAll(vmis: ResourceClient<VmiEvent>, byName: Map<string, Timeline>): Promise<void> {
  const creates: Promise<void>[] = [];
  const begin = performance.now();
  for (let i = 0; i < COUNT; i++) {
    const name = `density-${String(i).padStart(3, "0")}`;
    // Keep the cadence against the schedule, not the previous create (a slow create must not stretch it).
    const wait = begin + i * INTERVAL_MS - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const t: Timeline = { name, created: performance.now() };
    byName.set(name, t);
    creates.push(
      vmis.create(vmiManifest(name)).then(
        (obj: VmiEvent) => {
          t.uid ??= obj.metadata?.uid;
        },
        (err: unknown) => {
          t.failed = `create failed: ${(err as Error).message}`;
        },
      ),
    );
  }
  await Promise.all(creates);
}

async function waitAllRunning(byName: Map<string, Timeline>): Promise<void> {
  const deadline = performance.now() + TIMEOUT_MS;
  let lastReport = 0;
  for (;;) {
    const all = [...byName.values()];
    const done = all.filter((t) => t.running !== undefined || t.failed).length;
    if (done === all.length) return;
    if (performance.now() > deadline) {
      log(`timed out: ${done}/${all.length} Running or Failed after ${TIMEOUT_MS / 1000}s`);
      return;
    }
    if (performance.now() - lastReport > 5000) {
      lastReport = performance.now();
      log(`${all.filter((t) => t.running !== undefined).length}/${all.length} Running`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function cleanup(transport: RestTransport): Promise<void> {
  await transport
    .request({
      method: "DELETE",
      path: resourcePath(KUBEVIRT_V1.virtualMachineInstances, NAMESPACE),
      query: { labelSelector: LABEL },
    })
    .catch((err: unknown) => {
      log(`deleting the VMIs failed: ${String(err)}`);
    });
  const podClient = resourceClient<PodEvent>(transport, CORE_V1.pods);
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    const pods = await podClient.list(NAMESPACE, { labelSelector: "kubevirt.io/created-by" });
    if (pods.items.length === 0) return;
    await new Promise((r) => setTimeout(r, 500));
  }
  log("launcher pods still present after 120s; stopping the cluster anyway (the kubelets kill their pods)");
}

const stageNames = [
  ["create -> pod ADDED (virt-controller)", "created", "podAdded"],
  ["pod ADDED -> bound (scheduler)", "podAdded", "podBound"],
  ["bound -> pod Running (kubelet spawn)", "podBound", "podRunning"],
  ["pod Running -> VMI Scheduled (controller)", "podRunning", "scheduled"],
  ["Scheduled -> Running (launcher + handler)", "scheduled", "running"],
  ["create -> Running (total)", "created", "running"],
] as const;

function report(timelines: readonly Timeline[], rss: LauncherMemory[], cpu: Map<string, number>): string {
  const totals = sortedOf(timelines.map((t) => (t.running === undefined ? undefined : t.running - t.created)));
  const rssSorted = sortedOf(rss.map((r) => r.rss));
  const rows: string[] = [];
  const fmt = (ms: number): string => (ms / 1000).toFixed(3).padStart(8);
  rows.push(`${"stage".padEnd(44)} ${"P50 s".padStart(8)} ${"P95 s".padStart(8)} ${"max s".padStart(8)}`);
  for (const [label, from, to] of stageNames) {
    const d = sortedOf(
      timelines.map((t) => (t[to] === undefined || t[from] === undefined ? undefined : t[to] - t[from])),
    );
    rows.push(`${label.padEnd(44)} ${fmt(percentile(d, 50))} ${fmt(percentile(d, 95))} ${fmt(d.at(-1) ?? Number.NaN)}`);
  }
  const mib = (b: number): string => `${(b / 1024 / 1024).toFixed(1)} MiB`;
  const med = (xs: number[]): number => percentile(sortedOf(xs), 50);
  const failed = timelines.filter((t) => t.failed);
  const nodes = new Map<string, number>();
  for (const t of timelines) if (t.node) nodes.set(t.node, (nodes.get(t.node) ?? 0) + 1);
  rows.push(
    "",
    `VMIs Running: ${totals.length}/${timelines.length}; failed: ${failed.length}${failed.length ? ` (${failed[0].name}: ${failed[0].failed})` : ""}`,
    `per node: ${[...nodes].map(([n, c]) => `${n}=${c}`).join(" ")}`,
    `launcher memory (${rss.length} processes, medians): VmRSS ${mib(med(rss.map((r) => r.rss)))} (max ${mib(rssSorted.at(-1) ?? 0)}), PSS ${mib(med(rss.map((r) => r.pss)))}, guest RAM resident ${mib(med(rss.map((r) => r.guest)))}, VmRSS - guest RAM ${mib(med(rss.map((r) => r.rss - r.guest)))}, private (RssAnon - guest RAM) ${mib(med(rss.map((r) => r.anon - r.guest)))}`,
    `CPU seconds from the first create to the last Running (${timelines.length} VMIs): ${[...cpu]
      .sort((a, b) => b[1] - a[1])
      .map(([c, sec]) => `${c} ${sec.toFixed(2)}`)
      .join(", ")}; total ${[...cpu.values()].reduce((a, b) => a + b, 0).toFixed(2)}`,
    `goals: P50 < 1 s, P95 < 2 s, launcher < 60 MiB; load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")} on this shared machine (figures are noisy)`,
  );
  process.stdout.write(`${rows.join("\n")}\n`);
  const round = (x: number): number | null => (Number.isFinite(x) ? Math.round(x * 1000) / 1000 : null);
  const backends = [...new Set(timelines.flatMap((t) => (t.backend ? [t.backend] : [])))];
  return JSON.stringify({
    area: "density",
    lane: nested ? "nested" : "host",
    // Which machine backend ran the VMIs: native (our VMM) or qemu (software emulation); "mixed" if both.
    backend: backends.length === 1 ? backends[0] : backends.length ? "mixed" : null,
    vmis: timelines.length,
    p50Seconds: round(percentile(totals, 50) / 1000),
    p95Seconds: round(percentile(totals, 95) / 1000),
    launcherRssBytesMedian: rssSorted.length ? percentile(rssSorted, 50) : null,
  });
}

/**
 * Waits (up to 60 s) until every node has its launcher image built and its compile cache warmed, as KubeVirt's
 * density test runs on nodes that pulled the launcher image already.
 */
async function imagesReady(dataDir: string): Promise<void> {
  const started = performance.now();
  const nodesDir = join(dataDir, "nodes");
  const ready = (): boolean =>
    readdirSync(nodesDir).every(
      (node) =>
        existsSync(join(nodesDir, node, "launcher-image", "virt-launcher.mjs")) &&
        existsSync(join(nodesDir, node, "compile-cache")),
    );
  while (!ready() && performance.now() - started < 60_000) await new Promise((r) => setTimeout(r, 200));
  log(
    `launcher images ${ready() ? "ready" : "NOT ready (launchers run the sources)"} after ${((performance.now() - started) / 1000).toFixed(1)}s`,
  );
}

async function run(cluster: LocalCluster): Promise<string> {
  const transport = new RestClient(cluster.kubeConfig, { userAgent: "density-bench" });
  const byName = new Map<string, Timeline>();
  const watches = await watchTimelines(transport, byName);
  try {
    log(`creating ${COUNT} VMIs ${INTERVAL_MS} ms apart`);
    const cpuBefore = clusterCpu(cluster.dataDir);
    await createAll(resourceClient<VmiEvent>(transport, KUBEVIRT_V1.virtualMachineInstances), byName);
    await waitAllRunning(byName);
    const cpu = cpuBetween(cpuBefore, clusterCpu(cluster.dataDir));
    const pids = launcherPids(cluster.dataDir);
    const guestBytes = memoryBytes(values.memory);
    const rss = [...pids.values()].map((pid) => memoryOf(pid, guestBytes)).filter((r) => r !== undefined);
    return report([...byName.values()], rss, cpu);
  } finally {
    for (const w of watches) w.stop();
    log("deleting the VMIs");
    await cleanup(transport);
  }
}

registerTestGuest(testGuestPath());
const dataDir = mkdtempSync(join(tmpdir(), "kvt-density-"));
log(`starting a local cluster in ${dataDir} (load average ${loadavg()[0].toFixed(2)})`);
let cluster: LocalCluster | undefined;
let json = "";
let failure: unknown;
const interrupted = (): void => {
  void cluster
    ?.stop()
    .finally(() => rmSync(dataDir, { recursive: true, force: true }))
    .finally(() => process.exit(130));
};
process.once("SIGINT", interrupted);
process.once("SIGTERM", interrupted);
try {
  const started = performance.now();
  cluster = await startLocalCluster({
    projectRoot: root,
    dataDir,
    nodes: 2,
    nodeCpus: NODE_CPUS,
    progress: (m) => log(m),
  });
  log(`cluster up in ${((performance.now() - started) / 1000).toFixed(1)}s`);
  await imagesReady(dataDir);
  json = await run(cluster);
} catch (error) {
  failure = error;
} finally {
  await cluster?.stop();
  if (values.keep) log(`kept ${dataDir}`);
  else rmSync(dataDir, { recursive: true, force: true });
}
if (failure) {
  process.stderr.write(
    `[density] failed: ${failure instanceof Error ? (failure.stack ?? failure.message) : JSON.stringify(failure)}\n`,
  );
  process.exit(1);
}
process.stdout.write(`${json}\n`);
