/**
 * Which cluster an e2e run is given (KVT_E2E_CLUSTER), and the files that need our local cluster's internals: on a
 * real Kubernetes (`kube`) vitest.config.ts leaves them out and prints each one's reason. The other files run
 * unchanged on both.
 */

/** `local`: our embedded API server and process-kubelets (the default); `kube`: tools/kube's real Kubernetes. */
export type ClusterKind = "local" | "kube";

/** The cluster KVT_E2E_CLUSTER asks for; throws on anything else. */
export function clusterKindFromEnv(env: NodeJS.ProcessEnv = process.env): ClusterKind {
  const kind = env.KVT_E2E_CLUSTER ?? "local";
  if (kind !== "local" && kind !== "kube") {
    throw new Error(`KVT_E2E_CLUSTER=${kind}: expected local (the default) or kube`);
  }
  return kind;
}

/** e2e files (relative to e2e/) that run on the local cluster only, and what of it they need. */
export const LOCAL_CLUSTER_ONLY: Readonly<Record<string, string>> = {
  "cluster/least-privilege.e2e.test.ts":
    "reads each component's own kubeconfig from the local cluster's data directory (kubeconfig-<component>)",
  "cluster/listening-sockets.e2e.test.ts": "reads every component process's sockets on this host (local-cluster pids)",
  "cluster/certificate-rotation.e2e.test.ts":
    "reads virt-api's and the handlers' ports from the local cluster's cluster.json and serves them on the host",
  "network/service.e2e.test.ts":
    "reads the local cluster's pod network plan (network/pod-network.json) and enters pod namespaces",
  "emulation/no-kvm-host.e2e.test.ts": "starts a second local cluster with /dev/kvm hidden",
  "runtime/deno-cluster.e2e.test.ts": "starts a second local cluster on Deno",
  "storage/cluster-restart.e2e.test.ts": "stops and restarts a local cluster of its own",
  "failure/chaos.e2e.test.ts": "kills local-cluster component processes by pid",
  "failure/handler-kill.e2e.test.ts": "kills virt-handler processes by pid (e2e/lib/processes.ts)",
  "failure/kubelet-kill.e2e.test.ts": "kills process-kubelets by pid",
  "failure/launcher-kill.e2e.test.ts": "kills virt-launcher processes by pid on this host",
  "failure/migration-handler-kill.e2e.test.ts": "kills virt-handler and launcher processes by pid mid-migration",
  "observability/observability.e2e.test.ts": "reads the local cluster's trace file and Prometheus scrape config",
};

/**
 * e2e files left out on a real Kubernetes (`kube`) for an open bug found there, not for a need of the local cluster:
 * each reason says what failed, so the entry goes when the bug is fixed.
 */
export const KUBE_LANE_OPEN: Readonly<Record<string, string>> = {};
