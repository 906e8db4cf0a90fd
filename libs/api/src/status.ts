/**
 * `metav1.Status` in its JSON form: the body of every Kubernetes API error, an admission denial's `result`, and what
 * a client reads back. The one definition in the tree; `@kvt/kube` re-exports it under the same names.
 *
 * A {@link StatusCause} here is the wire form (the cause type under `reason`). The validators of this package build
 * {@link ValidationCause}s (Go's field names: `type`, `message`, `field`); `toWireCauses` turns those into these.
 */

/** `metav1.ListMeta`: the metadata of a list, and of a Status (always empty there). */
export interface ListMeta {
  resourceVersion?: string;
  continue?: string;
}

/** `metav1.StatusCause` as JSON: one cause of a failure (field-precise for validation errors). */
export interface StatusCause {
  /** `metav1.CauseType` (`FieldValueInvalid`, `FieldValueRequired`, ...): Go's `Type`, on the wire under `reason`. */
  reason?: string;
  message?: string;
  /** Field path, e.g. `spec.template.spec.domain.devices.disks[1].name`; omitted when empty (Go's omitempty). */
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
 * `metav1.Status`, the body of every API error: what a server answers (`@kvt/kube`'s builders fill every field
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
