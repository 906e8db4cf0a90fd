/**
 * `npm start [-- --data-dir DIR] [--nodes N] [--runtime node|deno] [--traces FILE] [--no-demo]`: the main job. Builds the local images if
 * missing, brings up the local cluster (API server, scheduler, nodes, virt-api, virt-controller, virt-handlers),
 * creates and starts the demo VM from the seed's `vm-cirros` example, prints how to use kubectl and virtctl with it,
 * and runs until Ctrl-C / SIGTERM / SIGHUP, which stops everything cleanly. State (the API server's data) persists
 * under the data directory, so the next `npm start` finds the VMs defined before.
 *
 * Nothing outlives it: SIGINT, SIGTERM and SIGHUP stop the cluster (a second one, a second or more later, exits at
 * once: npm forwards its copy of a Ctrl-C, which must not cut the clean stop short); so does the death of
 * the process that started it (npm killed, the terminal gone), noticed by watching the parent pid. If this process
 * itself is killed with SIGKILL, the components get SIGTERM from the kernel (the supervisor's parent-death signal).
 * One `npm start` per data directory: `<data-dir>/start.lock` holds the pid of the one running, and a second one
 * refuses to start while that pid lives.
 */
import { spawnSync } from "node:child_process";
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { buildDemoLinux, registerTestGuest } from "@kvt/images";
import { isAlreadyExists, KUBEVIRT_V1, type KubeAccess, type KubeObject, RestClient, resourceClient } from "@kvt/kube";
import { startLocalCluster } from "@kvt/local-cluster";
import { guardStdio } from "@kvt/observability";
import { testGuestPath } from "@kvt/vmm";
import { parse as parseYaml } from "yaml";
import { ensureCompilerCache } from "./compiler-cache.ts";
import { parseScriptArgs, usageError } from "./script-args.ts";

const USAGE = `usage: npm start [-- [--data-dir DIR] [--nodes N] [--runtime node|deno] [--traces FILE] [--no-demo]]

Brings up the local cluster and its demo VM (vm-cirros), prints how to use kubectl and virtctl with it, and runs
until Ctrl-C.
  --data-dir DIR   where the cluster keeps its state (default: .data/cluster)
  --nodes N        how many simulated nodes (default: 2)
  --runtime R      run every process of the cluster (components, launchers, their workers) on node or deno
                   (default: node; both come with the project's devDependencies)
  --traces FILE    write every component's trace spans to FILE (see npm run trace)
  --no-demo        do not create and start the demo VM
  -h, --help       print this usage`;

const root = new URL("../../../", import.meta.url).pathname;
// The terminal or pipe this supervisor reports to may go away (EPIPE) or fill a disk: that must not end the
// supervisor and orphan the cluster it runs.
guardStdio();
const { values } = parseScriptArgs(USAGE, {
  options: {
    "data-dir": { type: "string" },
    nodes: { type: "string" },
    runtime: { type: "string" },
    traces: { type: "string" },
    "no-demo": { type: "boolean" },
  },
});
if (values.nodes !== undefined && !/^[1-9]\d*$/.test(values.nodes)) {
  usageError(USAGE, `--nodes ${values.nodes}: expected a whole number of nodes, 1 or more`);
}
const runtime = values.runtime ?? "node";
if (runtime !== "node" && runtime !== "deno") {
  usageError(USAGE, `--runtime ${runtime}: expected node or deno`);
}
const dataDir = resolve(values["data-dir"] ?? join(root, ".data/cluster"));
const started = Date.now();
const progress = (message: string): void => {
  process.stdout.write(`[${((Date.now() - started) / 1000).toFixed(1).padStart(5)}s] ${message}\n`);
};

/**
 * Takes `<dataDir>/start.lock` for this process, or exits 1 saying which live process holds it. A lock whose pid is
 * gone (a run killed with SIGKILL) is taken over.
 */
function lockDataDir(dir: string): () => void {
  mkdirSync(dir, { recursive: true });
  const lock = join(dir, "start.lock");
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(lock, "wx", 0o644);
      writeFileSync(fd, `${process.pid}\n`);
      closeSync(fd);
      return () => {
        try {
          if (readFileSync(lock, "utf8").trim() === String(process.pid)) unlinkSync(lock);
        } catch {
          // Already gone: nothing to release.
        }
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    const holder = Number(readFileSync(lock, "utf8").trim());
    if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && isRunning(holder)) {
      process.stderr.write(
        `npm start: the data directory ${dir} is in use by another npm start (pid ${holder}, lock file ${lock}).\n` +
          "Stop that one first (kill " +
          `${holder}), or give this one its own --data-dir.\n`,
      );
      process.exit(1);
    }
    unlinkSync(lock); // stale: its process is gone
  }
  throw new Error(`cannot take the lock ${lock}`);
}

/** True if `pid` is a live process (EPERM: it exists but belongs to someone else). */
function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

async function ensureDemoVm(kubeConfig: KubeAccess): Promise<void> {
  const vms = resourceClient<KubeObject>(
    new RestClient(kubeConfig, { userAgent: "npm-start" }),
    KUBEVIRT_V1.virtualMachines,
  );
  const vm = parseYaml(readFileSync(join(root, "tools/local-cluster/manifests/vm-cirros.yaml"), "utf8")) as {
    metadata: { name: string };
  };
  try {
    await vms.create({ ...vm, metadata: { ...vm.metadata, namespace: "default" } });
    progress("created the demo VM vm-cirros (the seed's example, containerDisk local/demo-linux:latest)");
    // As the seed does next: start it.
    await vms.mergePatch("default", vm.metadata.name, { spec: { running: true } });
    progress("started vm-cirros (spec.running: true)");
  } catch (err) {
    if (!isAlreadyExists(err)) throw err;
    progress("vm-cirros exists from an earlier run; leaving it as it is");
  }
}

const unlock = lockDataDir(dataDir);

// Stop requests: a signal to this process, or the death of the process that started it. Until the cluster is up
// there is nothing to stop cleanly: exit, and the components already started get their parent-death signal.
const running: { cluster?: Awaited<ReturnType<typeof startLocalCluster>> } = {};
let stopRequested: ((why: string) => void) | undefined;
const stopWanted = new Promise<string>((resolveStop) => {
  stopRequested = resolveStop;
});
let stopping = false;
let stoppingSince = 0;
/**
 * A stop request. Once stopping, a signal a second or more later exits at once; one sooner is the same Ctrl-C (the
 * terminal signals npm and this process, and npm forwards its copy), and the parent's exit is not a request to hurry.
 */
const requestStop = (why: string, signal = true): void => {
  if (stopping) {
    if (!signal || Date.now() - stoppingSince < 1000) return;
    progress(`${why} again: exiting now`);
    unlock();
    process.exit(130);
  }
  stopping = true;
  stoppingSince = Date.now();
  if (!running.cluster) {
    progress(`${why} during start-up: exiting (started components stop with this process)`);
    unlock();
    process.exit(130);
  }
  stopRequested?.(why);
};
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(sig, () => requestStop(sig));
const parentPid = process.ppid;
const parentWatch = setInterval(() => {
  if (process.ppid === parentPid) return;
  clearInterval(parentWatch);
  requestStop(`the parent process (pid ${parentPid}) is gone`, false);
}, 1000);
parentWatch.unref();

if (!existsSync(join(root, "native/build/kvm_native.node")) || !existsSync(testGuestPath())) {
  progress("building the native VMM and the test guest (make -C native)");
  const noCcache = await ensureCompilerCache((line) => progress(`  ${line}`));
  if (noCcache) progress(noCcache);
  const built = spawnSync("make", ["-C", join(root, "native"), "-j2"], { stdio: ["ignore", "inherit", "inherit"] });
  if (built.status !== 0) {
    process.stderr.write("Building native/ failed (see above). It needs g++ and make: apt-get install -y g++ make\n");
    unlock();
    process.exit(1);
  }
}
progress("building local images if missing (local/demo-linux:latest, local/test-guest:latest)");
await buildDemoLinux({ log: (line) => progress(`  ${line}`) });
registerTestGuest(testGuestPath());

const cluster = await startLocalCluster({
  projectRoot: root,
  dataDir,
  nodes: values.nodes ? Number(values.nodes) : 2,
  runtime,
  tracesFile: values.traces ? resolve(values.traces) : undefined,
  progress,
});
running.cluster = cluster;
if (!values["no-demo"]) await ensureDemoVm(cluster.kubeConfig);

process.stdout.write(
  [
    "",
    `The local cluster is up (${cluster.nodeNames.join(", ")}, every process on ${runtime}). In another terminal:`,
    `  export KUBECONFIG=${cluster.kubeconfig}`,
    "  kubectl get vms,vmis -o wide",
    "  npx virtctl console vm-cirros        # Ctrl+] to leave",
    "  npx virtctl migrate vm-cirros",
    `Prometheus scrape config: ${cluster.scrapeConfigPath}`,
    ...(values.traces
      ? [
          `Traces: ${resolve(values.traces)} (render one with: npm run trace -- ${resolve(values.traces)} --migration NAME)`,
        ]
      : []),
    `Component logs: ${join(dataDir, "logs")}`,
    "Press Ctrl-C (or send SIGTERM/SIGHUP) to stop the cluster (its state stays in the data directory).",
    "",
  ].join("\n"),
);

const why = await stopWanted;
progress(`${why}: stopping the local cluster`);
await cluster.stop();
unlock();
progress("stopped");
process.exit(0);
