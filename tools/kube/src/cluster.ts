/**
 * `npm run kube -- up|down|status`: the real control plane as processes on loopback.
 *
 *   up:     certificates, ports, kubeconfigs (foreground, so errors show) -> spawn `cli.ts supervise` detached
 *           -> wait for etcd /health and kube-apiserver /readyz -> print `export KUBECONFIG=<admin.kubeconfig>`
 *   supervise: local-cluster's Supervisor runs etcd, kube-apiserver, kube-controller-manager, kube-scheduler
 *           (restart with backoff, each logging to logs/<name>.log, each dying with it through setpriv's
 *           parent-death signal); state.json names its pid and theirs; SIGTERM stops them all.
 *   down:   SIGTERM to the supervisor, wait; any recorded component still alive (a supervisor killed with SIGKILL
 *           on a host without setpriv) is killed by pid, after checking its command line is our binary.
 *   status: each component's pid and its health endpoint, verified against our CAs.
 */
import { spawn } from "node:child_process";
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { dirname, join } from "node:path";
import { freePort, processAlive, Supervisor, waitFor } from "@kvt/local-cluster";
import { createLogger } from "@kvt/observability";
import { binariesReady, binDir, DEFAULT_DATA_DIR } from "./build.ts";
import {
  apiserverArgs,
  type ControlPlaneLayout,
  type ControlPlanePorts,
  clusterPaths,
  controllerManagerArgs,
  controlPlaneKubeconfigs,
  etcdArgs,
  schedulerArgs,
} from "./control-plane.ts";
import { controlPlanePkiFiles, ensureControlPlanePki } from "./control-plane-pki.ts";

/** The components, in start order. */
export const COMPONENTS = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"] as const;
export type ComponentName = (typeof COMPONENTS)[number];

/** What `state.json` records while the supervisor runs. */
export interface ClusterState {
  readonly supervisorPid: number;
  readonly ports: ControlPlanePorts;
  readonly binDir: string;
  readonly pids: Partial<Record<ComponentName, number>>;
}

/** Where the binaries and the cluster live: the data dir (binaries) and the cluster dir (default <data-dir>/cluster). */
export interface ClusterLocation {
  readonly dataDir?: string;
  readonly clusterDir?: string;
}

/** The data directory and cluster directory of `where`, defaults filled in. */
export function resolveLocation(where: ClusterLocation = {}): { dataDir: string; dir: string } {
  const dataDir = where.dataDir ?? DEFAULT_DATA_DIR;
  return { dataDir, dir: where.clusterDir ?? join(dataDir, "cluster") };
}

/** A cluster command failed in a way the user can act on. */
export class KubeClusterError extends Error {
  override readonly name = "KubeClusterError";
}

/** The layout of a cluster, from its ports file (made by `up`). */
export function readLayout(where: ClusterLocation = {}): ControlPlaneLayout {
  const { dataDir, dir } = resolveLocation(where);
  const ports = JSON.parse(readFileSync(clusterPaths(dir).ports, "utf8")) as ControlPlanePorts;
  return { dir, binDir: binDir(dataDir), pki: controlPlanePkiFiles(join(dir, "pki")), ports };
}

/** The argv of each component. */
export function componentArgs(layout: ControlPlaneLayout): Record<ComponentName, string[]> {
  return {
    etcd: etcdArgs(layout),
    "kube-apiserver": apiserverArgs(layout),
    "kube-controller-manager": controllerManagerArgs(layout),
    "kube-scheduler": schedulerArgs(layout),
  };
}

/** The running cluster's state, or undefined when no supervisor of it is alive. */
export function readState(where: ClusterLocation = {}): ClusterState | undefined {
  const file = clusterPaths(resolveLocation(where).dir).state;
  if (!existsSync(file)) return undefined;
  try {
    const state = JSON.parse(readFileSync(file, "utf8")) as ClusterState;
    return processAlive(state.supervisorPid) ? state : undefined;
  } catch {
    return undefined;
  }
}

export interface UpOptions extends ClusterLocation {
  /** How long to wait for /readyz (default 180 s: a cold start on a loaded 2-core host). */
  readonly timeoutMs?: number;
  readonly log?: (line: string) => void;
}

/** Starts the control plane unless it runs; resolves with the admin kubeconfig's path once /readyz answers ok. */
export async function up(options: UpOptions = {}): Promise<string> {
  const { dataDir, dir } = resolveLocation(options);
  const log = options.log ?? ((line: string) => void process.stdout.write(`[kube] ${line}\n`));
  if (!binariesReady(dataDir)) {
    throw new KubeClusterError(
      `the Kubernetes binaries are not built in ${binDir(dataDir)}. Next: npm run kube -- build (about 30-60 min cold)`,
    );
  }
  const paths = clusterPaths(dir);
  if (readState(options)) {
    log("already up");
    await waitReady(readLayout(options), options.timeoutMs ?? 180_000);
    return paths.adminKubeconfig;
  }
  mkdirSync(paths.logs, { recursive: true });
  log(`certificates in ${join(dir, "pki")}`);
  await ensureControlPlanePki(join(dir, "pki"));
  if (!existsSync(paths.ports)) {
    // Five distinct ports: freePort closes each before the next, so the kernel could hand one out twice.
    const picked = new Set<number>();
    while (picked.size < 5) picked.add(await freePort());
    const [etcdClient, etcdPeer, apiserver, controllerManager, scheduler] = [...picked];
    const ports: ControlPlanePorts = { etcdClient, etcdPeer, apiserver, controllerManager, scheduler };
    writeFileSync(paths.ports, `${JSON.stringify(ports, null, 2)}\n`);
  }
  const layout = readLayout(options);
  for (const [file, text] of Object.entries(controlPlaneKubeconfigs(layout))) {
    writeFileSync(file, text, { mode: 0o600 });
  }

  const out = openSync(paths.daemonLog, "a");
  const cli = new URL("./cli.ts", import.meta.url).pathname;
  const daemon = spawn(process.execPath, [cli, "supervise", "--data-dir", dataDir, "--cluster-dir", dir], {
    detached: true,
    stdio: ["ignore", out, out],
  });
  closeSync(out);
  daemon.unref();
  log(`supervisor pid ${daemon.pid}; logs in ${paths.logs}`);
  const exited = new Promise<number | null>((resolve) => daemon.once("exit", (code) => resolve(code)));
  const ready = waitReady(layout, options.timeoutMs ?? 180_000);
  const first = await Promise.race([ready.then(() => "ready" as const), exited]);
  if (first !== "ready") {
    throw new KubeClusterError(
      `the supervisor exited (code ${first}) before kube-apiserver was ready; see ${paths.daemonLog} and ${paths.logs}/*.log`,
    );
  }
  log(
    `kube-apiserver ready at https://127.0.0.1:${layout.ports.apiserver}; kubectl of the same release: ${layout.binDir}/kubectl`,
  );
  return paths.adminKubeconfig;
}

async function waitReady(layout: ControlPlaneLayout, timeoutMs: number): Promise<void> {
  const logs = clusterPaths(layout.dir).logs;
  try {
    await waitFor("kube-apiserver /readyz", async () => (await probe(layout, "kube-apiserver")).ok, timeoutMs, 500);
  } catch (error) {
    throw new KubeClusterError(`${(error as Error).message}; see ${logs}/kube-apiserver.log and ${logs}/etcd.log`);
  }
}

/** Runs the supervisor in this process until SIGTERM/SIGINT (the detached child `up` starts). */
export async function supervise(where: ClusterLocation): Promise<void> {
  const logger = createLogger({ component: "kube-supervisor" });
  const layout = readLayout(where);
  const paths = clusterPaths(layout.dir);
  const pids: Partial<Record<ComponentName, number>> = {};
  const writeState = (): void => {
    const state: ClusterState = { supervisorPid: process.pid, ports: layout.ports, binDir: layout.binDir, pids };
    const tmp = `${paths.state}.${process.pid}`;
    writeFileSync(tmp, `${JSON.stringify(state, null, 2)}\n`);
    renameSync(tmp, paths.state);
  };
  const supervisor = new Supervisor((event) => {
    if (event.type === "started") pids[event.name as ComponentName] = event.pid;
    else delete pids[event.name as ComponentName];
    logger.info(event, `component ${event.type}`);
    writeState();
  });
  if (!supervisor.parentDeathSignal) logger.warn("setpriv is missing: components outlive a killed supervisor");
  writeState();
  const args = componentArgs(layout);
  for (const name of COMPONENTS) {
    const [cmd, ...rest] = args[name];
    supervisor.start({ name, argv: [cmd, ...rest], logFile: join(paths.logs, `${name}.log`) });
  }
  await new Promise<void>((resolve) => {
    for (const signal of ["SIGTERM", "SIGINT"] as const) process.once(signal, () => resolve());
  });
  logger.info("stopping");
  await supervisor.stopAll();
  rmSync(paths.state, { force: true });
  logger.info("stopped");
}

/** Stops the supervisor and every component; true when something was running. */
export async function down(where: ClusterLocation = {}, log = (_line: string): void => {}): Promise<boolean> {
  const file = clusterPaths(resolveLocation(where).dir).state;
  if (!existsSync(file)) return false;
  const state = JSON.parse(readFileSync(file, "utf8")) as ClusterState;
  const pids = Object.values(state.pids).filter((p): p is number => typeof p === "number");
  if (processAlive(state.supervisorPid)) {
    log(`stopping supervisor pid ${state.supervisorPid}`);
    process.kill(state.supervisorPid, "SIGTERM");
    await waitFor("the supervisor to stop", () => !processAlive(state.supervisorPid), 30_000, 100).catch(() => {
      process.kill(state.supervisorPid, "SIGKILL");
    });
  }
  for (const pid of pids) {
    if (processAlive(pid) && ourBinary(pid, state.binDir)) {
      log(`killing leftover component pid ${pid}`);
      process.kill(pid, "SIGKILL");
    }
  }
  await waitFor(
    "every component to exit",
    () => pids.every((p) => !processAlive(p) || !ourBinary(p, state.binDir)),
    15_000,
  );
  rmSync(file, { force: true });
  return true;
}

/** One component's health. */
export interface ComponentHealth {
  readonly name: ComponentName;
  readonly pid?: number;
  readonly url: string;
  readonly ok: boolean;
  readonly detail: string;
}

/** Every component's pid and health; empty when nothing runs. */
export async function status(where: ClusterLocation = {}): Promise<ComponentHealth[]> {
  const state = readState(where);
  if (!state) return [];
  const layout = readLayout(where);
  const result: ComponentHealth[] = [];
  for (const name of COMPONENTS) {
    const pid = state.pids[name];
    const health = await probe(layout, name);
    result.push({ name, pid, ...health });
  }
  return result;
}

/** The health endpoint of each component: path, port, CA and client certificate. */
export function healthEndpoint(layout: ControlPlaneLayout, name: ComponentName) {
  const { pki, ports } = layout;
  switch (name) {
    case "etcd":
      return { port: ports.etcdClient, path: "/health", ca: pki.etcdCa.cert, client: pki.etcdHealthcheckClient };
    case "kube-apiserver":
      return { port: ports.apiserver, path: "/readyz", ca: pki.ca.cert, client: pki.admin };
    case "kube-controller-manager":
      return { port: ports.controllerManager, path: "/healthz", ca: pki.ca.cert, client: pki.admin };
    case "kube-scheduler":
      return { port: ports.scheduler, path: "/healthz", ca: pki.ca.cert, client: pki.admin };
  }
}

async function probe(
  layout: ControlPlaneLayout,
  name: ComponentName,
): Promise<{ url: string; ok: boolean; detail: string }> {
  const e = healthEndpoint(layout, name);
  const url = `https://127.0.0.1:${e.port}${e.path}`;
  const [ca, cert, key] = [e.ca, e.client.cert, e.client.key].map((f) => readFileSync(f, "utf8"));
  return await new Promise((resolve) => {
    const req = request({ host: "127.0.0.1", port: e.port, path: e.path, ca, cert, key, timeout: 3000 }, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (c: string) => {
        body += c;
      });
      res.on("end", () => {
        const healthy = name === "etcd" ? /"health":\s*"true"/.test(body) : body.trim() === "ok";
        resolve({
          url,
          ok: res.statusCode === 200 && healthy,
          detail: `${res.statusCode} ${body.trim().slice(0, 200)}`,
        });
      });
    });
    req.on("timeout", () => req.destroy(new Error("timed out")));
    req.on("error", (error) => resolve({ url, ok: false, detail: error.message }));
    req.end();
  });
}

/** Whether `pid` runs a binary from `dir` (guards against a recycled pid). */
function ourBinary(pid: number, dir: string): boolean {
  try {
    const argv0 = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    return argv0.some((a) => a.startsWith(`${dir}/`) || dirname(a) === dir);
  } catch {
    return false;
  }
}
