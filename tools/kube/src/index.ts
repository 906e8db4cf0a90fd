/** @kvt/kube-cluster: a real Kubernetes control plane built from the Go module proxy and run on loopback. */

/** The cached build (`npm run kube -- build`) and whether its binaries are there. */
export { binariesReady, binDir, buildKube, DEFAULT_DATA_DIR, KubeBuildError } from "./build.ts";
/** Bring-up, tear-down and health of the control plane (`npm run kube -- up|down|status`). */
export { type ClusterLocation, type ComponentHealth, down, KubeClusterError, status, up } from "./cluster.ts";
/** The pinned versions and the binaries built from them. */
export { ETCD_VERSION, KUBERNETES_BINARIES, KUBERNETES_VERSION } from "./versions.ts";
