/**
 * `npm run bench -- controller [--vms N]`: N VirtualMachines (default 1,000) with runStrategy Always created at once
 * against the local API server (its own process, SQLite on disk) with virt-controller running as its own process.
 * Reports:
 *  - the seconds until all VMIs and all launcher Pods exist;
 *  - the controller's API requests per VMI by verb and resource (its `kubevirt_rest_client_requests_total`), over
 *    the whole run until it settles and at the moment the last pod appeared (requests made before that competed
 *    with the critical path). KubeVirt's density test allows PATCH VMI at most 2x and UPDATE VMI at most 10x the
 *    pod creates;
 *  - the controller's RSS when the creates start and its peak RSS (VmHWM);
 *  - the CPU seconds (user + system, from /proc) the controller, the API server and this bench client (its creates
 *    and informers) spent from the first create until all pods existed, and the controller's until it settled:
 *    the three share the machine's cores, so the controller's own CPU per VM is the figure to watch on a loaded
 *    machine (wall-clock times there mostly measure the others).
 * `KVT_BENCH_CONTROLLER_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof"` passes Node flags to the controller;
 * `KVT_BENCH_DEBUG=1` prints the controller's reconcile, retry, workqueue and failed-request series.
 * Last line: {"area":"controller","vms":..,"secondsToAllVmis":..,"secondsToAllPods":..,"requestsPerVmi":{..},
 * "requestsPerVmiAtAllPods":{..},"rssAtStartBytes":..,"peakRssBytes":..,"cpuSecondsToAllPods":{"controller":..,
 * "apiserver":..,"bench":..},"controllerCpuSecondsTotal":..,"controllerCpuMsPerVm":..,"loadAverage":..}
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { VirtualMachine, VirtualMachineInstance } from "@kvt/api";
import { CORE_V1, Informer, KUBEVIRT_V1, loadKubeConfig, type Pod, RestClient, resourceClient } from "@kvt/kube";
import { installKubeVirtCrds } from "@kvt/testing";
import { pino } from "pino";

const { values } = parseArgs({ options: { vms: { type: "string", default: "1000" } } });
const N = Math.max(1, Number(values.vms) || 1000);
const root = new URL("../../../", import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), "kvt-controller-bench-"));
const children: ChildProcess[] = [];
const logger = pino({ level: "silent" });

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** User + system CPU seconds a child process has used so far (/proc/<pid>/stat fields 14 and 15, in clock ticks). */
function cpuSecondsOf(pid: number | undefined): number {
  if (pid === undefined) return 0;
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100; // USER_HZ is 100 on Linux
}

/** This process's user + system CPU seconds so far. */
function ownCpuSeconds(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

function startProcess(args: string[], readyText: RegExp): Promise<ChildProcess> {
  const child = spawn(process.execPath, args, { cwd: root, stdio: ["ignore", "pipe", "inherit"] });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      if (readyText.test(out)) resolve(child);
    });
    child.once("exit", (code) => reject(new Error(`${args[0]} exited with ${code}`)));
  });
}

async function waitFor(check: () => Promise<boolean> | boolean, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Requests per VMI by verb and resource (watches and lists left out) from a scrape of the controller. */
function requestsPerVmi(metrics: string): Record<string, number> {
  const requests: Record<string, number> = {};
  for (const m of metrics.matchAll(/^kubevirt_rest_client_requests_total\{([^}]*)\} (\d+(?:\.\d+)?)/gm)) {
    const labels = Object.fromEntries([...m[1].matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (labels.verb === "WATCH" || labels.verb === "LIST") continue;
    const k = `${labels.verb} ${labels.resource}`;
    requests[k] = (requests[k] ?? 0) + Number(m[2]);
  }
  return Object.fromEntries(
    Object.entries(requests)
      .filter(([, v]) => v / N >= 0.005)
      .sort()
      .map(([k, v]) => [k, Math.round((v / N) * 100) / 100]),
  );
}

async function main(): Promise<void> {
  const kubeconfig = join(dir, "kubeconfig");
  const apiserver = await startProcess(
    [
      "tools/local-cluster/src/apiserver/main.ts",
      "--data-dir",
      join(dir, "api"),
      "--kubeconfig",
      kubeconfig,
      "--log-level",
      "warn",
    ],
    /listening on/,
  );
  const transport = new RestClient(loadKubeConfig({ kubeconfig }));
  await installKubeVirtCrds(transport, 10_000);
  const vms = resourceClient<VirtualMachine>(transport, KUBEVIRT_V1.virtualMachines);

  const metricsPort = await freePort();
  const controller = spawn(
    process.execPath,
    [
      ...(process.env.KVT_BENCH_CONTROLLER_NODE_ARGS?.split(" ").filter(Boolean) ?? []),
      "apps/virt-controller/src/main.ts",
      "--kubeconfig",
      kubeconfig,
      "--metrics-port",
      String(metricsPort),
      "--log-level",
      "warn",
    ],
    { cwd: root, stdio: ["ignore", "ignore", "inherit"] },
  );
  children.push(controller);
  const metricsUrl = `http://127.0.0.1:${metricsPort}`;
  await waitFor(
    () =>
      fetch(`${metricsUrl}/leader`).then(
        (r) => r.ok,
        () => false,
      ),
    30_000,
  );

  const vmiInformer = new Informer<VirtualMachineInstance>({
    client: resourceClient(transport, KUBEVIRT_V1.virtualMachineInstances),
    logger,
  });
  const podInformer = new Informer<Pod>({
    client: resourceClient(transport, CORE_V1.pods),
    logger,
    selector: { labelSelector: "kubevirt.io=virt-launcher" },
  });
  let allVmisAt = 0;
  let allPodsAt = 0;
  const cpu = (): { controller: number; apiserver: number; bench: number } => ({
    controller: cpuSecondsOf(controller.pid),
    apiserver: cpuSecondsOf(apiserver.pid),
    bench: ownCpuSeconds(),
  });
  let cpuAtAllPods = cpu();
  // The controller's request counts when the last pod appeared: what it spent on the critical path.
  let metricsAtAllPods: Promise<string> = Promise.resolve("");
  vmiInformer.addHandlers({
    onAdd: () => {
      if (vmiInformer.store.size >= N && !allVmisAt) allVmisAt = performance.now();
    },
  });
  podInformer.addHandlers({
    onAdd: () => {
      if (podInformer.store.size >= N && !allPodsAt) {
        allPodsAt = performance.now();
        cpuAtAllPods = cpu();
        metricsAtAllPods = fetch(`${metricsUrl}/metrics`).then(
          (r) => r.text(),
          () => "",
        );
      }
    },
  });
  vmiInformer.start();
  podInformer.start();
  await Promise.all([vmiInformer.waitForSync(), podInformer.waitForSync()]);

  const rssAtStartBytes =
    Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${controller.pid}/status`, "utf8"))?.[1] ?? 0) * 1024;
  const t0 = performance.now();
  const cpuAtStart = cpu();
  let next = 0;
  const vm = (i: number): VirtualMachine => ({
    metadata: { name: `vm-${i}`, namespace: "default" },
    spec: {
      runStrategy: "Always",
      template: { spec: { domain: { devices: {}, resources: { requests: { memory: "64Mi" } } } } },
    },
  });
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (next < N) await vms.create(vm(next++));
    }),
  );
  const createdAt = performance.now();
  await waitFor(() => allVmisAt > 0 && allPodsAt > 0, 300_000);

  // Request counts cover the whole run: wait until the controller has settled (no new requests for 2 s).
  const scrape = async (): Promise<string> => (await fetch(`${metricsUrl}/metrics`)).text();
  const total = (text: string): number =>
    [...text.matchAll(/^kubevirt_rest_client_requests_total\{[^}]*\} (\d+)/gm)].reduce((a, m) => a + Number(m[1]), 0);
  let metrics = await scrape();
  for (let i = 0; i < 30; i++) {
    await new Promise((r) => setTimeout(r, 2000));
    const next = await scrape();
    const settled = total(next) - total(metrics) <= 2; // lease renewals only
    metrics = next;
    if (settled) break;
  }
  if (process.env.KVT_BENCH_DEBUG)
    process.stderr.write(
      metrics
        .split("\n")
        .filter((l) =>
          /reconcile_total|workqueue_retries|workqueue_adds|(queue|work)_duration_seconds_(sum|count)|rest_client_requests_total.*code="4/.test(
            l,
          ),
        )
        .join("\n") + "\n",
    );
  const perVmi = requestsPerVmi(metrics);
  const perVmiAtAllPods = requestsPerVmi(await metricsAtAllPods);
  const cpuAtEnd = cpu();
  const round2 = (x: number): number => Math.round(x * 100) / 100;
  const cpuSecondsToAllPods = {
    controller: round2(cpuAtAllPods.controller - cpuAtStart.controller),
    apiserver: round2(cpuAtAllPods.apiserver - cpuAtStart.apiserver),
    bench: round2(cpuAtAllPods.bench - cpuAtStart.bench),
  };
  // Until settled: includes the reconciles that follow the last pod (status writes, the pods' own updates).
  const controllerCpuSecondsTotal = round2(cpuAtEnd.controller - cpuAtStart.controller);
  const controllerCpuMsPerVm = round2((controllerCpuSecondsTotal * 1000) / N);
  const status = readFileSync(`/proc/${controller.pid}/status`, "utf8");
  const peakRssBytes = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
  vmiInformer.stop();
  podInformer.stop();

  const secondsToAllVmis = Math.round(((allVmisAt - t0) / 1000) * 100) / 100;
  const secondsToAllPods = Math.round(((allPodsAt - t0) / 1000) * 100) / 100;
  const rows: [string, string][] = [
    ["VMs created (seconds)", ((createdAt - t0) / 1000).toFixed(2)],
    ["all VMIs exist (seconds)", String(secondsToAllVmis)],
    ["all launcher pods exist (seconds)", String(secondsToAllPods)],
    ["controller RSS before the creates (MiB)", (rssAtStartBytes / 2 ** 20).toFixed(1)],
    ["controller peak RSS (MiB)", (peakRssBytes / 2 ** 20).toFixed(1)],
    ["CPU s until all pods: controller", String(cpuSecondsToAllPods.controller)],
    ["CPU s until all pods: API server", String(cpuSecondsToAllPods.apiserver)],
    ["CPU s until all pods: bench client", String(cpuSecondsToAllPods.bench)],
    ["controller CPU s until settled", String(controllerCpuSecondsTotal)],
    ["controller CPU ms per VM", String(controllerCpuMsPerVm)],
    ...Object.entries(perVmi).map(([k, v]): [string, string] => [
      `requests per VMI: ${k}`,
      `${v} (${perVmiAtAllPods[k] ?? 0} when all pods existed)`,
    ]),
  ];
  const loadAverage = round2(loadavg()[0]);
  rows.push(["load average (1 min, at the end)", String(loadAverage)]);
  const w = Math.max(...rows.map((r) => r[0].length));
  process.stdout.write(`controller density: ${N} VMs, runStrategy Always\n`);
  for (const [k, v] of rows) process.stdout.write(`${k.padEnd(w)}  ${v}\n`);
  process.stdout.write(
    `${JSON.stringify({ area: "controller", vms: N, secondsToAllVmis, secondsToAllPods, requestsPerVmi: perVmi, requestsPerVmiAtAllPods: perVmiAtAllPods, rssAtStartBytes, peakRssBytes, cpuSecondsToAllPods, controllerCpuSecondsTotal, controllerCpuMsPerVm, loadAverage })}\n`,
  );
}

try {
  await main();
} finally {
  for (const c of children) c.kill("SIGTERM");
  await Promise.all(
    children.map((c) => (c.exitCode === null ? new Promise((r) => c.once("exit", r)) : Promise.resolve())),
  );
  rmSync(dir, { recursive: true, force: true });
}
