/**
 * The pinned versions of what `npm run kube -- build` compiles, and the binaries each build makes. Changing a
 * version here is the one way to rebuild: the stamp (stamp.ts) records these, and a build whose stamp differs
 * starts over.
 *
 * - Kubernetes v1.37.2: the newest release the Go module proxy serves here; its go.mod asks for go 1.26.0.
 * - etcd v3.7.3: kubeadm of 1.37 pins etcd 3.7.0 (`DefaultEtcdVersion`) and supports >= 3.5.24; Debian 12's
 *   etcd-server is 3.4, below that minimum, so etcd is built too.
 * - containerd v2.4.2: the kubelet's container runtime (CRI), with Debian's runc and CNI plugins; its go.mod asks
 *   for go 1.26.6. Built without the btrfs (cgo, needs libbtrfs headers), devmapper and zfs snapshotters.
 * - kwok v0.8.0: the newest release the Go module proxy serves here (`go list -m -versions sigs.k8s.io/kwok`);
 *   only its controller (cmd/kwok), which simulates nodes and their pods for the scale bench. Its go.mod asks for
 *   go 1.26.0 and pins k8s.io/* v0.36.1, so it gets a module of its own.
 * - local-path-provisioner v0.0.30: Rancher's provisioner, the lane's default StorageClass `local-path`
 *   (local-path.ts; ADR 0007); the newest release on the Go module proxy (`go list -m -versions
 *   github.com/rancher/local-path-provisioner`). Its go.mod asks for go 1.23.0 and pins k8s.io/* v0.30.0. Built
 *   without cgo: its image has nothing but the binary.
 */

/** The Kubernetes release (module k8s.io/kubernetes; its staging modules are the matching v0.X.Y tags). */
export const KUBERNETES_VERSION = "v1.37.2";

/** The etcd release (modules go.etcd.io/etcd/server/v3 and go.etcd.io/etcd/etcdctl/v3). */
export const ETCD_VERSION = "v3.7.3";

/** The containerd release (module github.com/containerd/containerd/v2). */
export const CONTAINERD_VERSION = "v2.4.2";

/** The kwok release (module sigs.k8s.io/kwok). */
export const KWOK_VERSION = "v0.8.0";

/** The local-path-provisioner release (module github.com/rancher/local-path-provisioner). */
export const LOCAL_PATH_VERSION = "v0.0.30";

/** The build tags containerd is compiled with: only the overlayfs and native snapshotters are needed here. */
export const CONTAINERD_TAGS = "no_btrfs,no_devmapper,no_zfs";

/** One binary: its file name and the Go package whose `main` it is. */
export interface BinarySpec {
  readonly name: string;
  readonly pkg: string;
}

/** What the Kubernetes module builds (kubectl too, so the tests and users get a client of the same minor). */
export const KUBERNETES_BINARIES: readonly BinarySpec[] = [
  { name: "kube-apiserver", pkg: "k8s.io/kubernetes/cmd/kube-apiserver" },
  { name: "kube-controller-manager", pkg: "k8s.io/kubernetes/cmd/kube-controller-manager" },
  { name: "kube-scheduler", pkg: "k8s.io/kubernetes/cmd/kube-scheduler" },
  { name: "kubelet", pkg: "k8s.io/kubernetes/cmd/kubelet" },
  { name: "kube-proxy", pkg: "k8s.io/kubernetes/cmd/kube-proxy" },
  { name: "kubectl", pkg: "k8s.io/kubernetes/cmd/kubectl" },
];

/** What the etcd modules build. */
export const ETCD_BINARIES: readonly BinarySpec[] = [
  { name: "etcd", pkg: "go.etcd.io/etcd/server/v3" },
  { name: "etcdctl", pkg: "go.etcd.io/etcd/etcdctl/v3" },
];

/** What the containerd module builds: the daemon, the runc shim it starts per pod, and ctr (image import). */
export const CONTAINERD_BINARIES: readonly BinarySpec[] = [
  { name: "containerd", pkg: "github.com/containerd/containerd/v2/cmd/containerd" },
  { name: "containerd-shim-runc-v2", pkg: "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2" },
  { name: "ctr", pkg: "github.com/containerd/containerd/v2/cmd/ctr" },
];

/** What the kwok module builds: the controller that fakes nodes and pods (not kwokctl, which runs clusters). */
export const KWOK_BINARIES: readonly BinarySpec[] = [{ name: "kwok", pkg: "sigs.k8s.io/kwok/cmd/kwok" }];

/** What the local-path-provisioner module builds: its one command (the module's root package is `main`). */
export const LOCAL_PATH_BINARIES: readonly BinarySpec[] = [
  { name: "local-path-provisioner", pkg: "github.com/rancher/local-path-provisioner" },
];

/** The staging modules' version for a Kubernetes release: v1.37.2 -> v0.37.2 (how Kubernetes tags them). */
export function stagingVersion(kubernetesVersion: string): string {
  const m = /^v1\.(\d+)\.(\d+)$/.exec(kubernetesVersion);
  if (!m) throw new Error(`not a Kubernetes release version: ${JSON.stringify(kubernetesVersion)} (want v1.X.Y)`);
  return `v0.${m[1]}.${m[2]}`;
}
