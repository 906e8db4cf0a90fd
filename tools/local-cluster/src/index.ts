/** @kvt/local-cluster: The local cluster: an embedded Kubernetes-compatible API server (node:sqlite), scheduler, process-kubelet and supervisor. */

/** Admission extension points (mutating/validating plugins, AdmissionReview-shaped attributes). */
export type {
  AdmissionAttributes,
  AdmissionChain,
  MutatingAdmission,
  ValidatingAdmission,
} from "./apiserver/admission/types.ts";
/** Start an embedded API server (random port with `port: 0`); its handle carries the extension points. */
export { type ApiServerHandle, type ApiServerOptions, startApiServer } from "./apiserver/apiserver.ts";
/** The API server's authorization audit (`--authorization-audit-log`): one JSON line per distinct decision. */
export { type AuthorizationAuditEntry, readAuthorizationAudit } from "./apiserver/auth/authorization-audit.ts";
/** Kubernetes Status errors (@kvt/kube's), for extension handlers. */
export { ApiError, type Status, type StatusCause } from "./apiserver/errors.ts";
/** Subresource and API aggregation extension points. */
export type { SubresourceContext, SubresourceHandler } from "./apiserver/http/resource-handler.ts";
export type { AggregatedApi, UserInfo } from "./apiserver/http/server.ts";
/** The kubeconfig renderer. */
export { renderKubeconfig } from "./apiserver/kubeconfig.ts";
/** Object shapes. */
export type { KubeObject, ObjectMeta } from "./apiserver/types.ts";
/** Bundle an app's entry point as the launcher image does (rolldown; each module keeps its source file's URL). */
/** The components' bundles the cluster runs, and how to recognise a component's process by its command line. */
export { COMPONENT_ENTRIES, runsComponent } from "./cluster/component-images.ts";
/** The Kubernetes object shapes the storage code reads. */
export type {
  V1Node,
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1StorageClass,
} from "./cluster/kube-models.ts";
/** The whole local cluster: bring-up under a data dir (npm start, e2e), its components and their supervisor. */
export { type LocalCluster, type LocalClusterOptions, startLocalCluster } from "./cluster/local-cluster.ts";
/** The cluster's CAs and leaves under a pki directory (made once, remade when due or from another CA). */
export { ensureCa, ensureLeaf } from "./cluster/pki.ts";
/** Whether a process exists (and is not a zombie). */
export { processAlive } from "./cluster/process-alive.ts";
/** Proof that every rule of the KubeVirt components' roles is needed by a flow, from an e2e run's audit. */
export {
  componentAccounts,
  type Flow,
  formatRbacUsage,
  KUBEVIRT_OWN_SECRETS,
  LOCAL_CLUSTER_EXEMPTIONS,
  rbacUsage,
} from "./cluster/rbac-usage.ts";
/** deploy/'s RBAC objects, as the local cluster applies them. */
export { releaseRbacObjects } from "./cluster/release-rbac.ts";
export { type ComponentSpec, Supervisor, type SupervisorEvent } from "./cluster/supervisor.ts";
/** Polling with a deadline, for start-up checks. */
export { waitFor } from "./cluster/wait.ts";
export { bundleEntry } from "./kubelet/launcher-image.ts";
/**
 * Host network plumbing shared with tools/kube's nodes (CIDR overlap, named namespaces, links, the Debian tools), and
 * the pod network itself (bridge, pods' namespaces by the CNI plugins) with the Service rules, for the network bench.
 */
export {
  cidrsOverlap,
  createPodNetwork,
  DEBIAN_CNI_BIN_DIR,
  linkExists,
  namespacesWithPrefix,
  POD_NETWORK_TOOLS,
  type PodNetworkConfig,
  prefixesInUse,
  proxyNetworkOf,
  removePodNetwork,
} from "./network/cluster-network.ts";
/** One node's pods in the pod network (a namespace each, wired by the CNI plugins). */
export { PodNetwork, type PodSandbox } from "./network/pod-network.ts";
/** The service proxy's pure rules and its nft and conntrack runners. */
export { runConntrack, staleFlows } from "./proxy/conntrack.ts";
export { runNft } from "./proxy/nft.ts";
export { type ProxyNetwork, renderRuleset, type ServicePortRoute, serviceRoutes } from "./proxy/nft-ruleset.ts";
export { linkDevice, makeBlockDevice, removeBlockDevice } from "./volumes/block-devices.ts";
/**
 * The local-block volumes' decisions (class, PV, device size, layout) and their host side (sparse file, loop device,
 * link), shared with tools/kube's host provisioner for kube-apiserver.
 */
export {
  backingFileOf,
  deviceBytes,
  LOCAL_BLOCK_CLASS,
  LOCAL_BLOCK_PROVISIONER,
  localBlockRefusal,
  localBlockStorageClass,
  localBlockVolume,
} from "./volumes/local-block.ts";
/** Loop devices keyed by their backing files (losetup). */
export {
  attach as attachLoopDevice,
  attachedUnder,
  canonicalFile,
  detachDevice,
  type LoopDevice,
  listLoopDevices,
} from "./volumes/loop-devices.ts";
/** A path strictly inside a directory (what a provisioner may remove). */
export { isInside } from "./volumes/provisioner-writes.ts";
/** The PV/PVC annotations of the volume controllers (provisioned-by, selected-node, storage-provisioner). */
export { ANN as VOLUME_ANNOTATIONS, classOf } from "./volumes/volume-match.ts";
