/**
 * `npm run bench -- scale [--vms N] [--nodes M] [--servers embedded,kube-apiserver]`: N VirtualMachines (default
 * 10,000, runStrategy Always) created at once with M nodes simulated by kwok (default 100), on our embedded API
 * server and on the real control plane (tools/kube: kube-apiserver v1.37.2, etcd, kube-controller-manager,
 * kube-scheduler) in the same run, one after the other:
 *
 *   embedded:       kvt-apiserver + local-scheduler (tools/local-cluster) + kwok + virt-controller
 *   kube-apiserver: `npm run kube -- up --nodes 0` in a temporary cluster directory + kwok + virt-controller
 *
 * On each: `kubectl apply` (the built kubectl) of deploy/'s namespace, CRDs and virt-controller RBAC; virt-controller
 * runs as its own process with a token of its ServiceAccount `kubevirt/kubevirt-controller` (TokenRequest), so the
 * release's least-privilege RBAC is what it works with, and on kube-apiserver API Priority and Fairness treats it as
 * a workload, not as the exempt admin; M Nodes annotated for kwok (capacity for the launcher pods' devices), kwok
 * makes them Ready and the launcher pods that the scheduler binds there Running; then the run of density.ts
 * (shared with the controller bench): seconds until all launcher Pods exist, requests per VMI by verb and resource
 * (kubevirt_rest_client_requests_total, until the controller settles), virt-controller's CPU seconds (until
 * settled) and peak RSS, and the CPU seconds of each other process until all Pods existed.
 *
 * Needs root (the real control plane's bridge) and the built binaries (`npm run kube -- build`). Prints a table per
 * server, then one JSON line per server, the kube-apiserver one last:
 * {"area":"scale","apiServer":"embedded"|"kube-apiserver","vms":..,"nodes":..,"secondsToAllPods":..,
 *  "requestsPerVmi":{..},"controllerCpuSeconds":..,"controllerPeakRssBytes":..,"secondsToAllVmis":..,
 *  "requestsPerVmiAtAllPods":{..},"cpuSecondsToAllPods":{..},"failedRequests":{..},"loadAverage":..}
 * (controllerCpuSeconds: virt-controller's user + system CPU from the first create until it settled).
 *
 * Figures (tools/kube/README.md "Scale" has them all, and the differences between the servers this bench found):
 * 10,000 VMs on 100 nodes on this shared 2-core machine (load average 7-12, CI beside it): all launcher pods after
 * 60.0 s on the embedded server and 389.7 s on kube-apiserver, which alone spent 292 CPU s (29 ms per VM) before the
 * last pod; every VMI Scheduled after 196.9 s and 457.4 s; virt-controller 35.2 / 44.5 CPU s until quiet and
 * 734 / 642 MiB peak RSS; per VMI 1 VMI and 1 pod create, 2.96 / 2.77 VMI updates, 2.27 / 2 VM status patches and
 * 2 events (KubeVirt's budget: VMI patches <= 2, updates <= 10 per pod). The 60 s goal needs several free cores for
 * kube-apiserver and etcd.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { CORE_V1, loadKubeConfig, type Node, RestClient, resourceClient } from "@kvt/kube";
import {
  binariesReady,
  binDir,
  createFakeNodes,
  DEFAULT_DATA_DIR,
  down,
  fakeNodeNames,
  startKwok,
  status,
  up,
} from "@kvt/kube-cluster";
import { type DensityFigures, densityRows, printTable, runDensity } from "./density.ts";
import { parseScaleArgs, round2, type ScaleServer } from "./density-figures.ts";

const args = parseScaleArgs(process.argv.slice(2));
const root = new URL("../../../", import.meta.url).pathname;
const bin = binDir(DEFAULT_DATA_DIR);
const kubectlPath = join(bin, "kubectl");
const run = promisify(execFile);
const log = (line: string): void => void process.stderr.write(`[scale] ${line}\n`);

/** Cleanups of what this bench started, last first (also on SIGINT/SIGTERM). */
const cleanups: (() => Promise<unknown>)[] = [];
async function cleanUp(): Promise<void> {
  while (cleanups.length > 0) {
    await cleanups
      .pop()?.()
      .catch((error: unknown) => log(`cleanup: ${(error as Error).message}`));
  }
}
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    log(`${signal}: stopping what the bench started`);
    void cleanUp().finally(() => process.exit(130));
  });
}

async function kubectl(kubeconfig: string, ...argv: string[]): Promise<string> {
  const { stdout } = await run(kubectlPath, [`--kubeconfig=${kubeconfig}`, ...argv], { maxBuffer: 64 * 2 ** 20 });
  return stdout;
}

/** A Node.js component of the local cluster as a child process, logging to `logFile`; resolves once `ready` is seen. */
function startNodeProcess(argv: string[], logFile: string, ready?: RegExp): Promise<ChildProcess> {
  const child = spawn(process.execPath, argv, { cwd: root, stdio: ["ignore", "pipe", openSync(logFile, "a")] });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
  });
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      out = (out + chunk.toString()).slice(-4096);
      if (ready?.test(out)) resolve(child);
    });
    if (!ready) resolve(child);
    child.once("exit", (code) => reject(new Error(`${argv[0]} exited with ${code}; see ${logFile}`)));
  });
}

/** An API server ready for the run: its admin kubeconfig and the processes whose CPU the run reports. */
interface Server {
  readonly kubeconfig: string;
  readonly others: Record<string, number | undefined>;
}

async function startEmbedded(dir: string): Promise<Server> {
  const kubeconfig = join(dir, "kubeconfig");
  const apiserver = await startNodeProcess(
    [
      "tools/local-cluster/src/apiserver/main.ts",
      ...["--data-dir", join(dir, "api"), "--kubeconfig", kubeconfig, "--log-level", "warn"],
    ],
    join(dir, "apiserver.log"),
    /listening on/,
  );
  const scheduler = await startNodeProcess(
    ["tools/local-cluster/src/scheduler/main.ts", "--kubeconfig", kubeconfig],
    join(dir, "scheduler.log"),
  );
  return { kubeconfig, others: { apiserver: apiserver.pid, scheduler: scheduler.pid } };
}

async function startKubeApiserver(dir: string): Promise<Server> {
  const where = { clusterDir: join(dir, "cluster") };
  cleanups.push(() => down(where, log));
  const result = await up({ ...where, nodes: 0, log });
  const { components } = await status(where);
  const pid = (name: string): number | undefined => components.find((c) => c.name === name)?.pid;
  const others = Object.fromEntries(
    ["kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler"].map((name) => [name, pid(name)]),
  );
  // The ServiceAccount admission plugin refuses pods until the controller manager made the namespace's `default`.
  await waitUntil("the default ServiceAccount", async () => {
    const out = await kubectl(result.kubeconfig, "get", "serviceaccount", "default", "-n", "default", "-o", "name");
    return out.trim() !== "";
  }).catch(() => undefined);
  return { kubeconfig: result.kubeconfig, others };
}

async function waitUntil(what: string, check: () => Promise<boolean>, timeoutMs = 120_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** deploy/'s namespace, CRDs and virt-controller RBAC; a kubeconfig with a token of virt-controller's ServiceAccount. */
async function installRelease(kubeconfig: string, dir: string): Promise<string> {
  const deploy = join(root, "deploy");
  await kubectl(
    kubeconfig,
    "apply",
    ...[
      "-f",
      join(deploy, "namespace.yaml"),
      "-f",
      join(deploy, "crds"),
      "-f",
      join(deploy, "virt-controller/rbac.yaml"),
    ],
  );
  await kubectl(kubeconfig, "wait", "--for=condition=Established", "crd", "--all", "--timeout=120s");
  await waitUntil("the kubevirt-controller ServiceAccount", async () => {
    await kubectl(kubeconfig, "get", "serviceaccount", "kubevirt-controller", "-n", "kubevirt");
    return true;
  });
  const token = (
    await kubectl(kubeconfig, "create", "token", "kubevirt-controller", "-n", "kubevirt", "--duration=10h")
  ).trim();
  const config = JSON.parse(
    await kubectl(kubeconfig, "config", "view", "--raw", "--minify", "--flatten", "-o", "json"),
  ) as { users: unknown[]; contexts: { context: { user: string } }[] };
  const user = "system:serviceaccount:kubevirt:kubevirt-controller";
  config.users = [{ name: user, user: { token } }];
  for (const context of config.contexts) context.context.user = user;
  const file = join(dir, "virt-controller.kubeconfig");
  writeFileSync(file, JSON.stringify(config, null, 2), { mode: 0o600 });
  return file;
}

/** kwok and its M Nodes; resolves once every Node is Ready. */
async function startNodes(kubeconfig: string, dir: string, count: number): Promise<number> {
  const logFile = join(dir, "kwok.log");
  closeSync(openSync(logFile, "a"));
  const kwok = startKwok({ binDir: bin, kubeconfig, logFile });
  cleanups.push(() => kwok.stop());
  const transport = new RestClient(loadKubeConfig({ kubeconfig }));
  const names = fakeNodeNames(count);
  await createFakeNodes(transport, names);
  const nodes = resourceClient<Node>(transport, CORE_V1.nodes);
  await waitUntil(`kwok to make ${count} nodes Ready (see ${logFile})`, async () => {
    const list = await nodes.list();
    const ready = list.items.filter(
      (n) =>
        names.includes(n.metadata?.name ?? "") &&
        n.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"),
    );
    return ready.length === count;
  });
  return kwok.pid;
}

async function runOn(server: ScaleServer): Promise<DensityFigures> {
  const dir = mkdtempSync(join(tmpdir(), `kvt-scale-${server}-`));
  cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
  const depth = cleanups.length;
  try {
    log(`${server}: starting (logs in ${dir})`);
    const s = server === "embedded" ? await startEmbedded(dir) : await startKubeApiserver(dir);
    const controllerKubeconfig = await installRelease(s.kubeconfig, dir);
    const kwok = await startNodes(s.kubeconfig, dir, args.nodes);
    log(`${server}: ${args.nodes} kwok nodes Ready; creating ${args.vms} VMs`);
    return await runDensity({
      root,
      kubeconfig: s.kubeconfig,
      controllerKubeconfig,
      vms: args.vms,
      others: { ...s.others, kwok },
      untilScheduled: true,
    });
  } finally {
    // What this server's run started, down to (not including) its directory; the directory goes once it is done.
    while (cleanups.length > depth) {
      await cleanups
        .pop()?.()
        .catch((error: unknown) => log(`cleanup: ${(error as Error).message}`));
    }
    const removeDir = cleanups.pop();
    if (process.env.KVT_BENCH_KEEP) log(`${server}: keeping ${dir} (KVT_BENCH_KEEP)`);
    else await removeDir?.();
  }
}

async function main(): Promise<void> {
  if (args.servers.includes("kube-apiserver") && !binariesReady(DEFAULT_DATA_DIR)) {
    throw new Error(`the Kubernetes and kwok binaries are not built in ${bin}. Next: npm run kube -- build`);
  }
  const lines: string[] = [];
  for (const server of args.servers) {
    const f = await runOn(server);
    const loadAverage = round2(loadavg()[0]);
    printTable(`scale: ${args.vms} VMs, ${args.nodes} kwok nodes, on ${server}`, [
      ...densityRows(f),
      ["load average (1 min, at the end)", String(loadAverage)],
    ]);
    lines.push(
      JSON.stringify({
        area: "scale",
        apiServer: server,
        vms: f.vms,
        nodes: args.nodes,
        secondsToAllPods: f.secondsToAllPods,
        requestsPerVmi: f.requestsPerVmi,
        controllerCpuSeconds: f.controllerCpuSecondsTotal,
        controllerPeakRssBytes: f.peakRssBytes,
        secondsToAllVmis: f.secondsToAllVmis,
        secondsToAllScheduled: f.secondsToAllScheduled,
        requestsPerVmiAtAllPods: f.requestsPerVmiAtAllPods,
        cpuSecondsToAllPods: f.cpuSecondsToAllPods,
        failedRequests: f.failedRequests,
        podsRunningAtEnd: f.podsRunningAtEnd,
        vmisScheduledAtEnd: f.vmisScheduledAtEnd,
        loadAverage,
      }),
    );
  }
  for (const line of lines) process.stdout.write(`${line}\n`);
}

try {
  await main();
} finally {
  await cleanUp();
}
