/**
 * One density run, shared by the controller and scale benches: against an API server that already serves KubeVirt's
 * CRDs, start virt-controller as its own process, create N VirtualMachines (runStrategy Always) at once, and measure
 *
 *   t0 = first create ──> all VMIs exist ──> all launcher Pods exist [──> all VMIs Scheduled, with untilScheduled]
 *      ──> settled (no new requests for 2 s; at most 30 ms per VM more, at least 60 s)
 *
 * - seconds to all VMIs and to all launcher Pods (this bench's informers see them);
 * - the controller's API requests per VMI by verb and resource (`kubevirt_rest_client_requests_total`) at the end
 *   and at the moment the last Pod appeared (what competed with the critical path);
 * - the controller's RSS when the creates start and its peak RSS (VmHWM);
 * - CPU seconds (user + system, /proc) of the controller, of each process in `others` (API server, etcd, scheduler,
 *   kwok, ...) and of this bench client, from the first create until all Pods existed; the controller's until settled.
 * `KVT_BENCH_CONTROLLER_NODE_ARGS` passes Node flags to the controller, `KVT_BENCH_CONTROLLER_LOG_LEVEL=debug` shows
 * its logs (every failed write of a reconcile, for one).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import type { VirtualMachine, VirtualMachineInstance } from "@kvt/api";
import { CORE_V1, Informer, KUBEVIRT_V1, loadKubeConfig, type Pod, RestClient, resourceClient } from "@kvt/kube";
import { freePort } from "@kvt/runtime";
import { pino } from "pino";
import {
  cpuSecondsFromStat,
  failedRequests,
  requestsPerVmi,
  round2,
  statusBytes,
  totalRequests,
} from "./density-figures.ts";

/** What to run against. */
export interface DensityOptions {
  /** The repository root (virt-controller runs from its sources there). */
  readonly root: string;
  /** The bench's own credentials (creates VMs, watches VMIs and Pods). */
  readonly kubeconfig: string;
  /** virt-controller's credentials (default: the bench's). */
  readonly controllerKubeconfig?: string;
  readonly vms: number;
  /** Where the VMs go (default `default`). */
  readonly namespace?: string;
  /** Other processes whose CPU seconds to report, by name (their pid, or undefined when unknown). */
  readonly others?: Readonly<Record<string, number | undefined>>;
  /**
   * Also wait, after all Pods exist, until every VMI is Scheduled (a scheduler binds the Pods and kwok runs them),
   * so the request counts cover each VMI's whole way through the controller.
   */
  readonly untilScheduled?: boolean;
  /** Give up waiting for the Pods (and for Scheduled) after this long (default 120 ms per VM, at least 300 s). */
  readonly timeoutMs?: number;
}

/** What one run measured. */
export interface DensityFigures {
  readonly vms: number;
  readonly secondsToCreate: number;
  readonly secondsToAllVmis: number;
  readonly secondsToAllPods: number;
  /** Seconds until every VMI was Scheduled (with `untilScheduled`; null when it did not happen in time). */
  readonly secondsToAllScheduled: number | null;
  readonly requestsPerVmi: Record<string, number>;
  readonly requestsPerVmiAtAllPods: Record<string, number>;
  /** Failed requests (4xx/5xx) over the run, by `VERB resource code`. */
  readonly failedRequests: Record<string, number>;
  readonly rssAtStartBytes: number;
  readonly peakRssBytes: number;
  /** CPU seconds from the first create until all Pods existed: `controller`, `bench` and each of `others`. */
  readonly cpuSecondsToAllPods: Record<string, number>;
  readonly controllerCpuSecondsTotal: number;
  readonly controllerCpuMsPerVm: number;
  /** Launcher pods Running, and VMIs in phase Scheduled, when the run ended (kwok and a scheduler make them so). */
  readonly podsRunningAtEnd: number;
  readonly vmisScheduledAtEnd: number;
  /** The controller's metrics at the end (for KVT_BENCH_DEBUG). */
  readonly metrics: string;
}

const cpuSecondsOf = (pid: number | undefined): number =>
  pid === undefined ? 0 : cpuSecondsFromStat(readFileSync(`/proc/${pid}/stat`, "utf8"));
const ownCpuSeconds = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

async function waitFor(what: string, check: () => Promise<boolean> | boolean, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** virt-controller as its own process, leading, with its /metrics scrape. */
interface Controller {
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
  scrape(): Promise<string>;
}

async function startController(o: DensityOptions): Promise<Controller> {
  const metricsPort = await freePort();
  const child = spawn(
    process.execPath,
    [
      ...(process.env.KVT_BENCH_CONTROLLER_NODE_ARGS?.split(" ").filter(Boolean) ?? []),
      "apps/virt-controller/src/main.ts",
      ...["--kubeconfig", o.controllerKubeconfig ?? o.kubeconfig, "--metrics-port", String(metricsPort)],
      ...["--log-level", process.env.KVT_BENCH_CONTROLLER_LOG_LEVEL ?? "warn"],
    ],
    // Its logs (pino, stdout) only when a level is asked for: KVT_BENCH_CONTROLLER_LOG_LEVEL=debug.
    { cwd: o.root, stdio: ["ignore", process.env.KVT_BENCH_CONTROLLER_LOG_LEVEL ? "inherit" : "ignore", "inherit"] },
  );
  // A bench that exits early (SIGINT, an error) takes the controller with it.
  const killOnExit = (): void => void child.kill("SIGTERM");
  process.once("exit", killOnExit);
  const exited = new Promise<void>((resolve) =>
    child.once("exit", () => {
      process.off("exit", killOnExit);
      resolve();
    }),
  );
  const url = `http://127.0.0.1:${metricsPort}`;
  const leading = (): Promise<boolean> =>
    fetch(`${url}/leader`).then(
      (r) => r.ok,
      () => false,
    );
  await waitFor("virt-controller to lead", () => child.exitCode === null && leading(), 60_000).catch(
    async (error: unknown) => {
      await stopController({ child, exited, scrape: async () => "" });
      throw error;
    },
  );
  return { child, exited, scrape: async () => (await fetch(`${url}/metrics`)).text() };
}

async function stopController(c: Controller): Promise<void> {
  if (c.child.exitCode === null && c.child.signalCode === null) c.child.kill("SIGTERM");
  await c.exited;
}

/** The controller's metrics once it settled: no new requests for 2 s (lease renewals aside), at most `capMs`. */
async function settled(scrape: () => Promise<string>, capMs: number): Promise<string> {
  const until = performance.now() + capMs;
  let metrics = await scrape();
  while (performance.now() < until) {
    await new Promise((r) => setTimeout(r, 2000));
    const later = await scrape();
    const quiet = totalRequests(later) - totalRequests(metrics) <= 2;
    metrics = later;
    if (quiet) break;
  }
  return metrics;
}

/** Creates `n` VMs with runStrategy Always, 64 at a time. */
async function createVms(transport: RestClient, n: number, namespace: string): Promise<void> {
  const vms = resourceClient<VirtualMachine>(transport, KUBEVIRT_V1.virtualMachines);
  let next = 0;
  const vm = (i: number): VirtualMachine => ({
    metadata: { name: `vm-${i}`, namespace },
    spec: {
      runStrategy: "Always",
      template: { spec: { domain: { devices: {}, resources: { requests: { memory: "64Mi" } } } } },
    },
  });
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (next < n) await vms.create(vm(next++));
    }),
  );
}

/** Starts virt-controller, creates the VMs, measures, stops the controller. */
export async function runDensity(o: DensityOptions): Promise<DensityFigures> {
  const n = o.vms;
  const timeoutMs = o.timeoutMs ?? Math.max(300_000, n * 120);
  const transport = new RestClient(loadKubeConfig({ kubeconfig: o.kubeconfig }));
  const logger = pino({ level: "silent" });
  const controller = await startController(o);
  const pid = controller.child.pid;
  const vmiInformer = new Informer<VirtualMachineInstance>({
    client: resourceClient(transport, KUBEVIRT_V1.virtualMachineInstances),
    logger,
  });
  const podInformer = new Informer<Pod>({
    client: resourceClient(transport, CORE_V1.pods),
    logger,
    selector: { labelSelector: "kubevirt.io=virt-launcher" },
  });
  try {
    let allVmisAt = 0;
    let allPodsAt = 0;
    const cpu = (): Record<string, number> => ({
      controller: cpuSecondsOf(pid),
      bench: ownCpuSeconds(),
      ...Object.fromEntries(Object.entries(o.others ?? {}).map(([name, p]) => [name, cpuSecondsOf(p)])),
    });
    let cpuAtAllPods = cpu();
    // The controller's request counts when the last pod appeared: what it spent on the critical path.
    let metricsAtAllPods: Promise<string> = Promise.resolve("");
    vmiInformer.addHandlers({
      onAdd: () => {
        if (vmiInformer.store.size >= n && !allVmisAt) allVmisAt = performance.now();
      },
    });
    podInformer.addHandlers({
      onAdd: () => {
        if (podInformer.store.size >= n && !allPodsAt) {
          allPodsAt = performance.now();
          cpuAtAllPods = cpu();
          metricsAtAllPods = controller.scrape().catch(() => "");
        }
      },
    });
    vmiInformer.start();
    podInformer.start();
    await Promise.all([vmiInformer.waitForSync(), podInformer.waitForSync()]);

    const rssAtStartBytes = statusBytes(readFileSync(`/proc/${pid}/status`, "utf8"), "VmRSS");
    const t0 = performance.now();
    const cpuAtStart = cpu();
    await createVms(transport, n, o.namespace ?? "default");
    const createdAt = performance.now();
    await waitFor(
      `${n} VMIs and launcher pods (have ${vmiInformer.store.size} and ${podInformer.store.size})`,
      () => {
        if (controller.child.exitCode !== null)
          throw new Error(`virt-controller exited (${controller.child.exitCode})`);
        return allVmisAt > 0 && allPodsAt > 0;
      },
      timeoutMs,
    );
    const scheduled = (): number => vmiInformer.store.list().filter((v) => v.status?.phase === "Scheduled").length;
    let allScheduledAt = 0;
    if (o.untilScheduled) {
      const until = t0 + timeoutMs;
      while (scheduled() < n && performance.now() < until) await new Promise((r) => setTimeout(r, 250));
      if (scheduled() >= n) allScheduledAt = performance.now();
    }
    // A backlog (VM status, events) can outlast the pods by minutes on a loaded API server: 30 ms per VM, >= 60 s.
    const metrics = await settled(() => controller.scrape(), Math.max(60_000, n * 30));
    const cpuAtEnd = cpu();
    // Until settled: includes the reconciles that follow the last pod (status writes, the pods' own updates).
    const controllerCpuSecondsTotal = round2(cpuAtEnd.controller - cpuAtStart.controller);
    return {
      vms: n,
      secondsToCreate: round2((createdAt - t0) / 1000),
      secondsToAllVmis: round2((allVmisAt - t0) / 1000),
      secondsToAllPods: round2((allPodsAt - t0) / 1000),
      secondsToAllScheduled: allScheduledAt ? round2((allScheduledAt - t0) / 1000) : null,
      requestsPerVmi: requestsPerVmi(metrics, n),
      requestsPerVmiAtAllPods: requestsPerVmi(await metricsAtAllPods, n),
      failedRequests: failedRequests(metrics),
      rssAtStartBytes,
      peakRssBytes: statusBytes(readFileSync(`/proc/${pid}/status`, "utf8"), "VmHWM"),
      cpuSecondsToAllPods: Object.fromEntries(
        Object.entries(cpuAtAllPods).map(([name, s]) => [name, round2(s - (cpuAtStart[name] ?? 0))]),
      ),
      controllerCpuSecondsTotal,
      controllerCpuMsPerVm: round2((controllerCpuSecondsTotal * 1000) / n),
      podsRunningAtEnd: podInformer.store.list().filter((p) => p.status?.phase === "Running").length,
      vmisScheduledAtEnd: scheduled(),
      metrics,
    };
  } finally {
    vmiInformer.stop();
    podInformer.stop();
    await stopController(controller);
  }
}

/** The rows of a run's table (figure name, value), for a bench's human-readable output. */
export function densityRows(f: DensityFigures): [string, string][] {
  return [
    ["VMs created (seconds)", String(f.secondsToCreate)],
    ["all VMIs exist (seconds)", String(f.secondsToAllVmis)],
    ["all launcher pods exist (seconds)", String(f.secondsToAllPods)],
    ...(f.secondsToAllScheduled === null
      ? []
      : [["all VMIs Scheduled (seconds)", String(f.secondsToAllScheduled)] as [string, string]]),
    ["controller RSS before the creates (MiB)", (f.rssAtStartBytes / 2 ** 20).toFixed(1)],
    ["controller peak RSS (MiB)", (f.peakRssBytes / 2 ** 20).toFixed(1)],
    ...Object.entries(f.cpuSecondsToAllPods).map(([name, s]): [string, string] => [
      `CPU s until all pods: ${name}`,
      String(s),
    ]),
    ["controller CPU s until settled", String(f.controllerCpuSecondsTotal)],
    ["controller CPU ms per VM", String(f.controllerCpuMsPerVm)],
    ["launcher pods Running / VMIs Scheduled at the end", `${f.podsRunningAtEnd} / ${f.vmisScheduledAtEnd}`],
    ...Object.entries(f.requestsPerVmi).map(([k, v]): [string, string] => [
      `requests per VMI: ${k}`,
      `${v} (${f.requestsPerVmiAtAllPods[k] ?? 0} when all pods existed)`,
    ]),
    ...Object.entries(f.failedRequests).map(([k, v]): [string, string] => [`failed requests: ${k}`, String(v)]),
  ];
}

/** Prints `rows` as an aligned two-column table under `title`. */
export function printTable(title: string, rows: readonly [string, string][]): void {
  const w = Math.max(...rows.map((r) => r[0].length));
  process.stdout.write(`${title}\n`);
  for (const [k, v] of rows) process.stdout.write(`${k.padEnd(w)}  ${v}\n`);
}
