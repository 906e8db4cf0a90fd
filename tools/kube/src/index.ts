/** @kvt/kube-cluster: a real Kubernetes built from the Go module proxy, run on this machine with real nodes. */

/** The cached build (`npm run kube -- build`) and whether its binaries are there. */
export { binariesReady, binDir, buildKube, DEFAULT_DATA_DIR, KubeBuildError } from "./build.ts";
/** Bring-up, tear-down and health of the cluster and its nodes (`npm run kube -- up|down|status`). */
export {
  type ClusterLocation,
  type ComponentHealth,
  DEFAULT_NODES,
  down,
  KubeClusterError,
  type NodeStatus,
  readNetwork,
  status,
  type UpResult,
  up,
} from "./cluster.ts";
/** kwok's simulated nodes (the scale bench): its command line, the Nodes it manages, a running controller. */
export {
  createFakeNodes,
  DEFAULT_FAKE_NODE,
  type FakeNodeCapacity,
  fakeNode,
  fakeNodeNames,
  type KwokOptions,
  type KwokProcess,
  kwokArgs,
  startKwok,
} from "./kwok.ts";
/** The pinned versions and the binaries built from them. */
export {
  CONTAINERD_VERSION,
  ETCD_VERSION,
  KUBERNETES_BINARIES,
  KUBERNETES_VERSION,
  KWOK_VERSION,
} from "./versions.ts";
