/**
 * `npm run kube -- <command> [--data-dir DIR] [--force]`:
 *
 *   build    compile kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl, etcd and etcdctl
 *            from the Go module proxy into <data-dir>/bin/<version>/ (skipped when current; --force rebuilds)
 *   up       build if needed, start etcd + the control plane on loopback, print `export KUBECONFIG=<path>`
 *   status   each component's pid and health (exit 1 when one is unhealthy or nothing runs)
 *   down     stop everything `up` started
 *
 * <data-dir> defaults to the repository's .data/kube (git-ignored). Exit 1 with what to do next on failure.
 */
import { parseArgs } from "node:util";
import { buildKube, DEFAULT_DATA_DIR } from "./build.ts";
import { down, status, supervise, up } from "./cluster.ts";

const USAGE = `usage: npm run kube -- build|up|status|down [--data-dir DIR] [--cluster-dir DIR] [--force]

  build    compile the pinned Kubernetes and etcd binaries (cached; --force rebuilds)
  up       build if needed, start etcd, kube-apiserver, controller-manager, scheduler; print the kubeconfig export
  status   each component's pid and health
  down     stop everything up started
`;

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    "data-dir": { type: "string" },
    "cluster-dir": { type: "string" },
    force: { type: "boolean", default: false },
    help: { type: "boolean", short: "h", default: false },
  },
});
const dataDir = values["data-dir"] ?? DEFAULT_DATA_DIR;
const where = { dataDir, clusterDir: values["cluster-dir"] };
const log = (line: string): void => void process.stderr.write(`[kube] ${line}\n`);
const command = positionals[0];

try {
  if (values.help) {
    process.stdout.write(USAGE);
  } else if (command === "build") {
    await buildKube({ dataDir, force: values.force, log });
  } else if (command === "up") {
    await buildKube({ dataDir, log });
    const kubeconfig = await up({ ...where, log });
    process.stdout.write(`export KUBECONFIG=${kubeconfig}\n`);
  } else if (command === "supervise") {
    await supervise(where);
  } else if (command === "down") {
    const stopped = await down(where, log);
    log(stopped ? "stopped" : "nothing was running");
  } else if (command === "status") {
    const health = await status(where);
    if (health.length === 0) {
      process.stdout.write("not running (npm run kube -- up)\n");
      process.exitCode = 1;
    }
    for (const h of health) {
      const pid = h.pid ? `pid ${h.pid}` : "no pid";
      process.stdout.write(
        `${h.name.padEnd(24)} ${pid.padEnd(11)} ${h.ok ? "healthy" : "UNHEALTHY"}  ${h.url}  ${h.detail}\n`,
      );
      if (!h.ok) process.exitCode = 1;
    }
  } else {
    process.stderr.write(command ? `unknown command ${command}\n${USAGE}` : USAGE);
    process.exitCode = 2;
  }
} catch (error) {
  process.stderr.write(`[kube] ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
}
