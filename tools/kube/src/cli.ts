/**
 * `npm run kube -- <command> [--data-dir DIR] [--force]`:
 *
 *   build    compile kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl, etcd and etcdctl
 *            from the Go module proxy into <data-dir>/bin/<version>/ (skipped when current; --force rebuilds)
 *   up       build if needed, start etcd, the control plane, a registry and --nodes N (default 2) nodes, each a
 *            kubelet and containerd in a network namespace; print `export KUBECONFIG=<path>` once all are Ready
 *   status   each component's pid, RSS and health, and the nodes (exit 1 when one is unhealthy or nothing runs)
 *   down     stop everything `up` started
 *
 * <data-dir> defaults to the repository's .data/kube (git-ignored). Exit 1 with what to do next on failure.
 */
import { join } from "node:path";
import { parseArgs } from "node:util";
import { createLogger } from "@kvt/observability";
import { buildKube, DEFAULT_DATA_DIR } from "./build.ts";
import { DEFAULT_NODES, down, status, supervise, up } from "./cluster.ts";
import { LOCAL_BLOCK_COMPONENT, runLocalBlockProvisioner } from "./local-block.ts";

const USAGE = `usage: npm run kube -- build|up|status|down [--nodes N] [--data-dir DIR] [--cluster-dir DIR] [--force]

  build    compile the pinned Kubernetes, etcd and containerd binaries (cached; --force rebuilds)
  up       build if needed, start etcd, kube-apiserver, controller-manager, scheduler, a registry and N nodes
           (--nodes, default ${DEFAULT_NODES}); print the kubeconfig export once every node is Ready
  status   each component's pid, memory and health, and the nodes
  down     stop everything up started and remove its namespaces, bridge, routes, nft table, mounts and cgroups
`;

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    "data-dir": { type: "string" },
    "cluster-dir": { type: "string" },
    force: { type: "boolean", default: false },
    nodes: { type: "string" },
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
    const nodes = values.nodes === undefined ? DEFAULT_NODES : Number(values.nodes);
    await buildKube({ dataDir, log });
    const result = await up({ ...where, nodes, log });
    log(`registry ${result.registry}; images ${result.images.pause}, ${result.images.busybox}`);
    process.stdout.write(`export KUBECONFIG=${result.kubeconfig}\n`);
  } else if (command === "supervise") {
    await supervise(where);
  } else if (command === LOCAL_BLOCK_COMPONENT) {
    // The supervised Block provisioner (local-block.ts); SIGTERM stops it and detaches its devices.
    const stop = new AbortController();
    for (const signal of ["SIGTERM", "SIGINT"] as const) process.once(signal, () => stop.abort());
    const dir = values["cluster-dir"] ?? join(dataDir, "cluster");
    await runLocalBlockProvisioner(dir, createLogger({ component: LOCAL_BLOCK_COMPONENT }), stop.signal);
  } else if (command === "down") {
    const stopped = await down(where, log);
    log(stopped ? "stopped" : "nothing was running");
  } else if (command === "status") {
    const { components, nodes } = await status(where);
    if (components.length === 0) {
      process.stdout.write("not running (npm run kube -- up)\n");
      process.exitCode = 1;
    }
    for (const h of components) {
      const pid = h.pid ? `pid ${h.pid}` : "no pid";
      const rss = h.rssBytes === undefined ? "" : `${(h.rssBytes / 2 ** 20).toFixed(0)} MiB`;
      const line = `${h.name.padEnd(24)} ${pid.padEnd(11)} ${rss.padStart(8)}  ${h.ok ? "healthy" : "UNHEALTHY"}`;
      process.stdout.write(`${line}  ${h.url}  ${h.detail}\n`);
      if (!h.ok) process.exitCode = 1;
    }
    for (const n of nodes) {
      const facts = [n.internalIp, n.podCidr, n.kubeletVersion, n.containerRuntimeVersion].map((f) => f ?? "-");
      process.stdout.write(
        `node ${n.name.padEnd(19)} ${(n.ready ? "Ready" : "NotReady").padEnd(9)} ${facts.join("  ")}\n`,
      );
      if (!n.ready) process.exitCode = 1;
    }
  } else {
    process.stderr.write(command ? `unknown command ${command}\n${USAGE}` : USAGE);
    process.exitCode = 2;
  }
} catch (error) {
  process.stderr.write(`[kube] ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
}
