/**
 * The Kubernetes object shapes the plumbing itself needs (metadata, owner references, Status, Lease, Event), as
 * plain JSON interfaces: objects travel as the API server's JSON, never through generated model classes.
 */

/** `metav1.OwnerReference`. */
export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/** `metav1.ObjectMeta`, the fields the components read and write. */
export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string | null;
  deletionTimestamp?: string | null;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  finalizers?: string[];
}

/** Any Kubernetes object: apiVersion, kind and metadata; the rest is the kind's business. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
}

/** `metav1.ListMeta`. */
export interface ListMeta {
  resourceVersion?: string;
  continue?: string;
}

/** A list response (`PodList`, `VirtualMachineList`, ...). */
export interface KubeList<T> {
  apiVersion?: string;
  kind?: string;
  metadata?: ListMeta;
  items: T[];
}

/** `metav1.StatusCause`: one cause of a failure (field-precise for validation errors). */
export interface StatusCause {
  /** `metav1.CauseType` (`FieldValueInvalid`, `FieldValueRequired`, ...): Go's `Type`, on the wire under `reason`. */
  reason?: string;
  message?: string;
  /** Field path, e.g. `spec.template.spec.domain.devices.disks[1].name`. */
  field?: string;
}

/** `metav1.StatusDetails`: the object a failure is about, its causes, and when to retry. */
export interface StatusDetails {
  name?: string;
  group?: string;
  /** The resource (`virtualmachines`) or kind the failure is about. */
  kind?: string;
  uid?: string;
  causes?: StatusCause[];
  retryAfterSeconds?: number;
}

/**
 * `metav1.Status`, the body of every API error: what a server answers (the builders in `status.ts` fill every field
 * kube-apiserver sends) and what a client reads (any field may be missing there).
 */
export interface Status {
  apiVersion?: string;
  kind?: "Status";
  metadata?: ListMeta;
  status?: "Success" | "Failure";
  message?: string;
  reason?: string;
  details?: StatusDetails;
  code?: number;
}

/** `coordination.k8s.io/v1` Lease. */
export interface Lease extends KubeObject {
  spec?: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
}

/** The object an Event is about (`corev1.ObjectReference`). */
export interface ObjectReference {
  apiVersion?: string;
  kind?: string;
  namespace?: string;
  name?: string;
  uid?: string;
  resourceVersion?: string;
}

/** `core/v1` Event. */
export interface CoreEvent extends KubeObject {
  involvedObject: ObjectReference;
  reason?: string;
  message?: string;
  type?: "Normal" | "Warning";
  count?: number;
  firstTimestamp?: string;
  lastTimestamp?: string;
  source?: { component?: string; host?: string };
  reportingComponent?: string;
  reportingInstance?: string;
}
