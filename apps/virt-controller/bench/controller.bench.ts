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
 * "bench":..,"apiserver":..},"controllerCpuSecondsTotal":..,"controllerCpuMsPerVm":..,"loadAverage":..}
 * The run itself (controller process, creates, measuring) is density.ts, shared with the scale bench.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { loadKubeConfig, RestClient } from "@kvt/kube";
import { installKubeVirtCrds } from "@kvt/testing";
import { densityRows, printTable, runDensity } from "./density.ts";
import { round2 } from "./density-figures.ts";

const { values } = parseArgs({ options: { vms: { type: "string", default: "1000" } } });
const N = Math.max(1, Number(values.vms) || 1000);
const root = new URL("../../../", import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), "kvt-controller-bench-"));
const children: ChildProcess[] = [];

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
  await installKubeVirtCrds(new RestClient(loadKubeConfig({ kubeconfig })), 10_000);
  const f = await runDensity({ root, kubeconfig, vms: N, others: { apiserver: apiserver.pid } });
  if (process.env.KVT_BENCH_DEBUG)
    process.stderr.write(
      `${f.metrics
        .split("\n")
        .filter((l) =>
          /reconcile_total|workqueue_retries|workqueue_adds|(queue|work)_duration_seconds_(sum|count)|rest_client_requests_total.*code="4/.test(
            l,
          ),
        )
        .join("\n")}\n`,
    );
  const loadAverage = round2(loadavg()[0]);
  printTable(`controller density: ${N} VMs, runStrategy Always`, [
    ...densityRows(f),
    ["load average (1 min, at the end)", String(loadAverage)],
  ]);
  const {
    metrics: _,
    failedRequests: __,
    secondsToCreate: ___,
    podsRunningAtEnd: _r,
    vmisScheduledAtEnd: _s,
    secondsToAllScheduled: _t,
    ...figures
  } = f;
  process.stdout.write(`${JSON.stringify({ area: "controller", ...figures, loadAverage })}\n`);
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
