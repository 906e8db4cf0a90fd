/**
 * The local cluster on Deno 2 (`npm start -- --runtime deno`): a second local cluster whose every process runs on
 * Deno: the API server (with its storage worker threads), the scheduler, the process-kubelets, virt-api,
 * virt-controller, the virt-handlers and the virt-launchers the kubelets start. It runs the seed's vm-cirros flow
 * (create, start, console, a live migration, stop) and checks, through /proc, that each of those processes' executable
 * is Deno's, launchers included: a sampler records every launcher of this cluster while the flow runs (the source
 * and the target of the migration). Worker threads run inside their process, so its executable covers them.
 */
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { registerTestGuest } from "@kvt/images";
import { type LocalCluster, startLocalCluster } from "@kvt/local-cluster";
import { testGuestPath } from "@kvt/vmm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { describeSeedVmFlow } from "../lib/seed-flow.ts";

const root = new URL("../../", import.meta.url).pathname;
let cluster: LocalCluster | undefined;
let dataDir = "";
/** Launchers of this cluster seen while the tests ran: pid -> executable. */
const launchers = new Map<number, string>();
let sampler: ReturnType<typeof setInterval> | undefined;

/** The executable of process `pid` (symlinks resolved), or undefined when it is gone. */
function executableOf(pid: number): string | undefined {
  try {
    return realpathSync(readlinkSync(`/proc/${pid}/exe`));
  } catch {
    return undefined;
  }
}

/** Executables that wrap a container's command without being its runtime. */
const WRAPPERS = new Set(["sh", "dash", "bash", "nsenter"]);

/** Records the launchers of this cluster: processes running virt-launcher in a pod directory under `dataDir`. */
function sampleLaunchers(): void {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || launchers.has(Number(entry))) continue;
    try {
      const cwd = readlinkSync(`/proc/${entry}/cwd`);
      const argv = readFileSync(`/proc/${entry}/cmdline`, "utf8");
      if (!cwd.startsWith(join(dataDir, "nodes")) || !argv.includes("virt-launcher")) continue;
      const exe = executableOf(Number(entry));
      // The kubelet's shim (`/bin/sh`, which forwards signals and records the exit code) and `nsenter` (into the
      // pod's network namespace) carry the launcher's command line too, but only run it: they are not the launcher.
      if (exe && !WRAPPERS.has(basename(exe))) launchers.set(Number(entry), exe);
    } catch {
      // The process ended while we looked: skip it.
    }
  }
}

beforeAll(async () => {
  registerTestGuest(testGuestPath());
  dataDir = realpathSync(mkdtempSync(join(tmpdir(), "kvt-e2e-deno-")));
  cluster = await startLocalCluster({
    projectRoot: root,
    dataDir,
    nodes: 2,
    runtime: "deno",
    progress: (m) => process.stdout.write(`[e2e deno cluster] ${m}\n`),
  });
  sampler = setInterval(sampleLaunchers, 250);
}, 300_000);

afterAll(async () => {
  clearInterval(sampler);
  await cluster?.stop();
  if (dataDir && !process.env.KVT_E2E_KEEP) rmSync(dataDir, { recursive: true, force: true });
}, 60_000);

const kubeconfig = (): string => {
  if (!cluster) throw new Error("the Deno cluster did not start");
  return cluster.kubeconfig;
};

describe("the local cluster on Deno", () => {
  it("runs every component on Deno: API server, scheduler, kubelets, service proxy, virt-api, virt-controller, virt-handlers", () => {
    const c = cluster!;
    const names = [
      "apiserver",
      "scheduler",
      ...c.nodeNames.map((n) => `kubelet/${n}`),
      // A root cluster has the pod network, and with it the service proxy.
      ...(process.getuid?.() === 0 ? ["service-proxy"] : []),
      "virt-api",
      "virt-controller",
      ...c.nodeNames.map((n) => `virt-handler/${n}`),
    ];
    const exes = Object.fromEntries(names.map((n) => [n, basename(executableOf(c.supervisor.pidOf(n) ?? 0) ?? "")]));
    expect(exes).toEqual(Object.fromEntries(names.map((n) => [n, "deno"])));
    for (const n of names) expect(c.supervisor.restartsOf(n), `${n} restarted`).toBe(0);
  });
});

describeSeedVmFlow("the seed's vm-cirros on the Deno cluster", kubeconfig);

describe("the launchers on Deno", () => {
  it("every launcher the flow started (the migration's source and target) ran on Deno", () => {
    clearInterval(sampler);
    expect(launchers.size).toBeGreaterThanOrEqual(2);
    expect([...new Set([...launchers.values()].map((exe) => basename(exe)))]).toEqual(["deno"]);
  });
});
