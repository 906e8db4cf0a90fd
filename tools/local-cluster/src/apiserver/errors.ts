/**
 * The API server's failure answers. Every non-2xx answer is an `ApiError` of @kvt/kube carrying the whole
 * `Status`, built with apimachinery's reasons and message patterns (k8s.io/apimachinery/pkg/api/errors), so kubectl
 * prints `Error from server (<Reason>): <message>` exactly as it does against a real cluster. The generic builders
 * (`notFound`, `conflict`, `invalid`, ...) are @kvt/kube's, shared with virt-api; the answers below are the ones
 * only a storage-backed API server gives.
 */
import { ApiError, statusError } from "@kvt/kube";

export {
  ApiError,
  alreadyExists,
  badRequest,
  conflict,
  forbidden,
  type GroupResource,
  invalid,
  methodNotSupported,
  notFound,
  qualifiedResource,
  type Status,
  type StatusCause,
  type StatusDetails,
  statusError,
} from "@kvt/kube";

/** 410 Expired: a watch or continue from a compacted revision. */
export function expired(rv: number, oldest: number): ApiError {
  return statusError(410, "Expired", `too old resource version: ${rv} (${oldest})`);
}

/**
 * 504 Timeout for a read at a resourceVersion the server has not reached (kube-apiserver's watch cache answers this
 * after waiting 3 s; storage.NewTooLargeResourceVersionError): retry after 1 s, cause ResourceVersionTooLarge.
 */
export function tooLargeResourceVersion(requested: number, current: number): ApiError {
  return statusError(504, "Timeout", `Timeout: Too large resource version: ${requested}, current: ${current}`, {
    causes: [{ reason: "ResourceVersionTooLarge", message: "Too large resource version" }],
    retryAfterSeconds: 1,
  });
}

/** 415 UnsupportedMediaType: a body (or patch) type the verb does not accept. */
export function unsupportedMediaType(accepted: readonly string[]): ApiError {
  return statusError(
    415,
    "UnsupportedMediaType",
    `the body of the request was in an unknown format - accepted media types include: ${accepted.join(", ")}`,
  );
}

/** 500 InternalError for anything thrown that is not an ApiError. */
export function internal(err: unknown): ApiError {
  const msg = err instanceof Error ? err.message : String(err);
  return statusError(500, "InternalError", `Internal error occurred: ${msg}`, {
    causes: [{ reason: "UnexpectedServerResponse", message: msg }],
  });
}

/** Wraps anything thrown into an ApiError (unknown errors become 500). */
export function toApiError(err: unknown): ApiError {
  return err instanceof ApiError ? err : internal(err);
}
