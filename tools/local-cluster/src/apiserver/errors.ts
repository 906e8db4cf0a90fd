/**
 * Kubernetes `Status` errors. Every non-2xx answer of the server is one of these, with the reason and message
 * patterns of the real kube-apiserver (k8s.io/apimachinery/pkg/api/errors), so kubectl prints
 * `Error from server (<Reason>): <message>` exactly as it does against a real cluster.
 */

/** One field-level cause in `details.causes`. */
export interface StatusCause {
  reason: string;
  message: string;
  field?: string;
}

/** `details` of a Status. */
export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  uid?: string;
  causes?: StatusCause[];
  retryAfterSeconds?: number;
}

/** A metav1.Status object. */
export interface StatusObject {
  kind: "Status";
  apiVersion: "v1";
  metadata: Record<string, never>;
  status: "Failure" | "Success";
  message?: string;
  reason?: string;
  details?: StatusDetails;
  code: number;
}

/** An API error carrying the HTTP code, reason and details of a Kubernetes Status. */
export class ApiError extends Error {
  readonly code: number;
  readonly reason: string;
  readonly details: StatusDetails | undefined;

  constructor(code: number, reason: string, message: string, details?: StatusDetails) {
    super(message);
    this.name = "ApiError";
    this.code = code;
    this.reason = reason;
    this.details = details;
  }

  /** The Status object sent on the wire. */
  toStatus(): StatusObject {
    const s: StatusObject = {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: this.message,
      code: this.code,
    };
    // An empty reason is StatusReasonUnknown, which kube-apiserver omits (e.g. a storage "space exceeded" 500).
    if (this.reason) s.reason = this.reason;
    if (this.details) s.details = this.details;
    return s;
  }
}

/** Identifies a resource in messages: plural and group (`virtualmachineinstances.kubevirt.io`). */
export interface QualifiedResource {
  readonly group: string;
  readonly resource: string;
}

/** `plural[.group]` as used in Kubernetes error messages. */
export function qualified(qr: QualifiedResource): string {
  return qr.group ? `${qr.resource}.${qr.group}` : qr.resource;
}

/** 404 NotFound: `pods "x" not found`. */
export function notFound(qr: QualifiedResource, name: string): ApiError {
  return new ApiError(404, "NotFound", `${qualified(qr)} "${name}" not found`, {
    name,
    group: qr.group,
    kind: qr.resource,
  });
}

/** 409 AlreadyExists. */
export function alreadyExists(qr: QualifiedResource, name: string): ApiError {
  return new ApiError(409, "AlreadyExists", `${qualified(qr)} "${name}" already exists`, {
    name,
    group: qr.group,
    kind: qr.resource,
  });
}

/** 409 Conflict with Kubernetes' exact optimistic-concurrency message. */
export function conflict(qr: QualifiedResource, name: string, why?: string): ApiError {
  const reason = why ?? "the object has been modified; please apply your changes to the latest version and try again";
  return new ApiError(409, "Conflict", `Operation cannot be fulfilled on ${qualified(qr)} "${name}": ${reason}`, {
    name,
    group: qr.group,
    kind: qr.resource,
  });
}

/** 422 Invalid: `Kind.group "x" is invalid: [field: msg, ...]`. */
export function invalid(kind: string, group: string, name: string, causes: StatusCause[]): ApiError {
  const kindGroup = group ? `${kind}.${group}` : kind;
  const parts = causes.map((c) => (c.field ? `${c.field}: ${c.message}` : c.message));
  const list = parts.length === 1 ? parts[0] : `[${parts.join(", ")}]`;
  return new ApiError(422, "Invalid", `${kindGroup} "${name}" is invalid: ${list}`, {
    name,
    group,
    kind,
    causes,
  });
}

/** 400 BadRequest. */
export function badRequest(message: string): ApiError {
  return new ApiError(400, "BadRequest", message);
}

/** 403 Forbidden: `<qr> "x" is forbidden: why`. */
export function forbidden(qr: QualifiedResource, name: string, why: string): ApiError {
  return new ApiError(403, "Forbidden", `${qualified(qr)} "${name}" is forbidden: ${why}`, {
    name,
    group: qr.group,
    kind: qr.resource,
  });
}

/** 405 MethodNotAllowed. */
export function methodNotAllowed(verb: string, qr: QualifiedResource): ApiError {
  return new ApiError(405, "MethodNotAllowed", `${verb} is not supported on resources of kind "${qualified(qr)}"`);
}

/** 410 Expired: a watch or continue from a compacted revision. */
export function expired(rv: number, oldest: number): ApiError {
  return new ApiError(410, "Expired", `too old resource version: ${rv} (${oldest})`);
}

/**
 * 504 Timeout for a read at a resourceVersion the server has not reached (kube-apiserver's watch cache answers this
 * after waiting 3 s; storage.NewTooLargeResourceVersionError): retry after 1 s, cause ResourceVersionTooLarge.
 */
export function tooLargeResourceVersion(requested: number, current: number): ApiError {
  return new ApiError(504, "Timeout", `Timeout: Too large resource version: ${requested}, current: ${current}`, {
    causes: [{ reason: "ResourceVersionTooLarge", message: "Too large resource version" }],
    retryAfterSeconds: 1,
  });
}

/** 415 UnsupportedMediaType: a body (or patch) type the verb does not accept. */
export function unsupportedMediaType(accepted: readonly string[]): ApiError {
  return new ApiError(
    415,
    "UnsupportedMediaType",
    `the body of the request was in an unknown format - accepted media types include: ${accepted.join(", ")}`,
  );
}

/** 500 InternalError. */
export function internal(err: unknown): ApiError {
  const msg = err instanceof Error ? err.message : String(err);
  return new ApiError(500, "InternalError", `Internal error occurred: ${msg}`, {
    causes: [{ reason: "UnexpectedServerResponse", message: msg }],
  });
}

/** Wraps anything thrown into an ApiError (unknown errors become 500). */
export function toApiError(err: unknown): ApiError {
  return err instanceof ApiError ? err : internal(err);
}
