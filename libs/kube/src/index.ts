/** @kvt/kube: Kubernetes client plumbing: typed clients, informers, workqueue, expectations, leader election, events, reconcile runner. */

/** The resource type of an apiVersion and kind, from the API server's discovery documents. */
export { ResourceDiscovery } from "./client/discovery.ts";
/** JSON patches with `test` preconditions. */
export { deepEqual, diffMembers, type JsonPatchOp, patchField, pointer, pointerSegment } from "./client/json-patch.ts";
/** KubeConfig loading as kubectl does it (--kubeconfig, a merged $KUBECONFIG, in-cluster, ~/.kube/config). */
export {
  type KubeAccess,
  type KubeConfigSource,
  kubeConfigFor,
  kubeConfigFromFile,
  type LoadedKubeConfig,
  loadKubeConfig,
} from "./client/kube-config.ts";
/** Typed per-kind clients. */
export {
  apiVersionOf,
  type DeleteOptions,
  type ListOptions,
  type ResourceClient,
  type ResourceType,
  resourceClient,
  resourcePath,
} from "./client/resource-client.ts";
/** The HTTP transport (node:http(s), keep-alive) authenticated from a kubeconfig, with impersonation as an option. */
export {
  describePath,
  type Impersonation,
  impersonationHeaders,
  pathTemplate,
  type RawWatchEvent,
  RestClient,
  type RestClientOptions,
  type RestRequest,
  type RestTransport,
  type UpgradeTarget,
  type WatchHandle,
} from "./client/rest-client.ts";
/** core/v1 Pod and Node shapes, and the core resource types. */
export {
  CORE_V1,
  type Container,
  type ContainerStatus,
  type Node,
  type PersistentVolumeClaim,
  type Pod,
  type PodCondition,
  type PodVolume,
  type ResourceList,
} from "./core-v1.ts";
/** API errors and reconcile errors. */
export {
  ApiError,
  errorMessage,
  isAlreadyExists,
  isConflict,
  isGone,
  isInvalid,
  isNotFound,
  SyncError,
  TerminalError,
} from "./errors.ts";
/** core/v1 Event recording. */
export { EventRecorder, type EventRecorderOptions, type EventSink } from "./event-recorder.ts";
/** Create/delete expectations. */
export { EXPECTATIONS_TTL_MS, Expectations, firstRejection } from "./expectations.ts";
/** One key of one ConfigMap, followed through a name-selected watch (KubeVirt's CA bundle informer). */
export { type ConfigMapKeyOptions, type ConfigMapKeyWatch, watchConfigMapKey } from "./informer/config-map-key.ts";
/** List-then-watch informer. */
export { Informer, type InformerHandlers, type InformerOptions } from "./informer/informer.ts";
/** Informer cache with indexes. */
export { controllerOwnerIndex, type IndexFunc, labelIndex, namespaceIndex, Store } from "./informer/store.ts";
/** kubevirt.io resource types. */
export { KUBEVIRT_V1 } from "./kubevirt-types.ts";
/** Leader election on a Lease. */
export { LeaderElector, type LeaderElectorOptions } from "./leader/leader-election.ts";
/** Controller references and the cached owner they name. */
export { cachedController, controllerRefOf } from "./owners.ts";
/** Reconcile results and the runner. */
export { done, type ReconcileContext, type Reconciler, type Result, requeueAfter } from "./reconcile/result.ts";
export { Runner, type RunnerOptions } from "./reconcile/runner.ts";
/** Status on both sides of the wire: apimachinery's failure answers, and the Status of a client's non-2xx answer. */
export {
  alreadyExists,
  answerMessage,
  answerStatus,
  badRequest,
  conflict,
  failureStatus,
  forbidden,
  type GroupResource,
  internalError,
  invalid,
  isStatus,
  methodNotSupported,
  notFound,
  OPTIMISTIC_LOCK_ERROR,
  parseJson,
  qualifiedResource,
  statusError,
  unauthorized,
} from "./status.ts";
/** Plain JSON shapes of metadata, Status, Lease and Event. */
export type {
  CoreEvent,
  KubeList,
  KubeObject,
  Lease,
  ListMeta,
  ObjectMeta,
  ObjectReference,
  OwnerReference,
  Status,
  StatusCause,
  StatusDetails,
} from "./types.ts";
/** Writes of a controller its informer cache has not shown yet (skip reconciles that would act on stale data). */
export { UNOBSERVED_WRITE_TTL_MS, UnobservedWrites } from "./unobserved-writes.ts";
/** Rate limiters for retries. */
export {
  BucketRateLimiter,
  defaultControllerRateLimiter,
  ItemExponentialRateLimiter,
  MaxOfRateLimiter,
  type RateLimiter,
} from "./workqueue/rate-limiter.ts";
/** The de-duplicating workqueue and its metrics. */
export { WorkQueue, type WorkQueueOptions } from "./workqueue/workqueue.ts";
export { type WorkqueueMetrics, workqueueMetrics } from "./workqueue/workqueue-metrics.ts";
