/**
 * Kubernetes `Status` on both sides of the wire, with apimachinery's reasons and message patterns
 * (k8s.io/apimachinery/pkg/api/errors): a server builds its failure answers with the `New*`-style functions below
 * (each an {@link ApiError} carrying the whole Status, so kubectl prints `Error from server (<Reason>): <message>`
 * as against a real cluster); a client turns a non-2xx answer into one with {@link answerStatus}.
 *
 * ```
 *   server: throw notFound(VM, name)  ──>  res.end(JSON.stringify(error.status))
 *   client: non-2xx (code, body)  ──answerStatus──>  the body's Status, or client-go's generic one for the code
 * ```
 */
import { ApiError } from "./errors.ts";
import type { Status, StatusCause, StatusDetails } from "./types.ts";

/** A group-qualified resource (`schema.GroupResource`): `{group: "kubevirt.io", resource: "virtualmachines"}`. */
export interface GroupResource {
  /** API group; `""` for core. */
  readonly group: string;
  /** Resource name as messages show it (the plural, or KubeVirt's singular in its subresource errors). */
  readonly resource: string;
}

/** `resource[.group]`, as Kubernetes error messages name a resource (`virtualmachines.kubevirt.io`, `pods`). */
export function qualifiedResource(gr: GroupResource): string {
  return gr.group ? `${gr.resource}.${gr.group}` : gr.resource;
}

/** The parsed JSON of `text`, or undefined when it is not JSON. */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    // A non-JSON body (a proxy's HTML error page): the caller keeps the text for the message.
    return undefined;
  }
}

/** The `message` of a Status answer `text`, else the text itself (its first `max` characters when given). */
export function answerMessage(text: string, max?: number): string {
  const body = parseJson(text);
  const message = typeof body === "object" && body !== null ? (body as { message?: unknown }).message : undefined;
  return typeof message === "string" ? message : text.slice(0, max);
}

/** True when `v` is a `Status` object. */
export function isStatus(v: unknown): v is Status {
  return typeof v === "object" && v !== null && (v as { kind?: unknown }).kind === "Status";
}

/** A failure Status with every field kube-apiserver sends; `details` only when given. */
export function failureStatus(code: number, reason: string, message: string, details?: StatusDetails): Status {
  const status: Status = { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message };
  // An empty reason is StatusReasonUnknown, which kube-apiserver omits (e.g. a storage "space exceeded" 500).
  if (reason) status.reason = reason;
  if (details) status.details = details;
  status.code = code;
  return status;
}

/** An {@link ApiError} that answers with {@link failureStatus}`(code, reason, message, details)`. */
export function statusError(code: number, reason: string, message: string, details?: StatusDetails): ApiError {
  return new ApiError(message, code, failureStatus(code, reason, message, details));
}

/** client-go's reason and message for an answer `code` whose body is no Status (`NewGenericServerResponse`). */
function genericResponse(code: number, serverMessage: string): { reason: string; message: string } {
  switch (code) {
    case 400:
      return { reason: "BadRequest", message: "the server rejected our request for an unknown reason" };
    case 401:
      return { reason: "Unauthorized", message: "the server has asked for the client to provide credentials" };
    case 403:
      // The server's text says who may not do what: client-go keeps it.
      return { reason: "Forbidden", message: serverMessage };
    case 404:
      return { reason: "NotFound", message: "the server could not find the requested resource" };
    case 405:
      return { reason: "MethodNotAllowed", message: "the server does not allow this method on the requested resource" };
    case 409:
      return { reason: "Conflict", message: "the server reported a conflict" };
    case 415:
      return { reason: "UnsupportedMediaType", message: serverMessage };
    case 422:
      return { reason: "Invalid", message: "the server rejected our request due to an error in our request" };
    case 429:
      return {
        reason: "TooManyRequests",
        message: "the server has received too many requests and has asked us to try again later",
      };
    case 503:
      return { reason: "ServiceUnavailable", message: "the server is currently unable to handle the request" };
    case 504:
      return {
        reason: "Timeout",
        message:
          "the server was unable to return a response in the time allotted, but may still be processing the request",
      };
  }
  if (code >= 500) {
    const message = `an error on the server (${JSON.stringify(serverMessage)}) has prevented the request from succeeding`;
    return { reason: "InternalError", message };
  }
  return {
    reason: "",
    message: `the server responded with the status code ${code} but did not return more information`,
  };
}

/** Longest server text kept in a generic message (an HTML error page would drown the line). */
const MAX_SERVER_MESSAGE = 500;

/**
 * The Status of a non-2xx answer `code` with body `text`: the body when it is a Status (its code filled in when
 * missing), else the one client-go makes (`the server could not find the requested resource`, ...), with the
 * server's text as an `UnexpectedServerResponse` cause.
 */
export function answerStatus(code: number, text: string): Status {
  const body = parseJson(text);
  if (isStatus(body)) return body.code === undefined ? { ...body, code } : body;
  const serverMessage = text.trim().slice(0, MAX_SERVER_MESSAGE) || "unknown";
  const { reason, message } = genericResponse(code, serverMessage);
  return failureStatus(code, reason, message, {
    causes: [{ reason: "UnexpectedServerResponse", message: serverMessage }],
  });
}

const objectDetails = (gr: GroupResource, name: string): StatusDetails => ({
  name,
  group: gr.group,
  kind: gr.resource,
});

/** 400 BadRequest with the message as given. */
export function badRequest(message: string): ApiError {
  return statusError(400, "BadRequest", message);
}

/** 401 Unauthorized: the caller's identity could not be established. */
export function unauthorized(message: string): ApiError {
  return statusError(401, "Unauthorized", message);
}

/** 403 Forbidden: `<resource> "<name>" is forbidden: <why>`. */
export function forbidden(gr: GroupResource, name: string, why: string): ApiError {
  const message = `${qualifiedResource(gr)} "${name}" is forbidden: ${why}`;
  return statusError(403, "Forbidden", message, objectDetails(gr, name));
}

/** 404 NotFound: `<resource> "<name>" not found`. */
export function notFound(gr: GroupResource, name: string): ApiError {
  return statusError(404, "NotFound", `${qualifiedResource(gr)} "${name}" not found`, objectDetails(gr, name));
}

/** 405 MethodNotAllowed: `<verb> is not supported on resources of kind "<resource>"`. */
export function methodNotSupported(verb: string, gr: GroupResource): ApiError {
  return statusError(
    405,
    "MethodNotAllowed",
    `${verb} is not supported on resources of kind "${qualifiedResource(gr)}"`,
  );
}

/** 409 AlreadyExists: `<resource> "<name>" already exists`. */
export function alreadyExists(gr: GroupResource, name: string): ApiError {
  const message = `${qualifiedResource(gr)} "${name}" already exists`;
  return statusError(409, "AlreadyExists", message, objectDetails(gr, name));
}

/** The optimistic-concurrency failure's text, apimachinery's `OptimisticLockErrorMsg`. */
export const OPTIMISTIC_LOCK_ERROR =
  "the object has been modified; please apply your changes to the latest version and try again";

/** 409 Conflict: `Operation cannot be fulfilled on <resource> "<name>": <why>` (default: the optimistic-lock text). */
export function conflict(gr: GroupResource, name: string, why: string = OPTIMISTIC_LOCK_ERROR): ApiError {
  const message = `Operation cannot be fulfilled on ${qualifiedResource(gr)} "${name}": ${why}`;
  return statusError(409, "Conflict", message, objectDetails(gr, name));
}

/**
 * 422 Invalid: `<Kind>.<group> "<name>" is invalid: <causes>`, the causes as `field: message`, in brackets when more
 * than one (apimachinery's aggregate).
 */
export function invalid(kind: string, group: string, name: string, causes: StatusCause[]): ApiError {
  const parts = causes.map((c) => (c.field ? `${c.field}: ${c.message ?? ""}` : (c.message ?? "")));
  const list = parts.length === 1 ? parts[0] : `[${parts.join(", ")}]`;
  const message = `${group ? `${kind}.${group}` : kind} "${name}" is invalid: ${list}`;
  return statusError(422, "Invalid", message, { name, group, kind, causes });
}

/** 500 InternalError: `Internal error occurred: <why>`, with `why` as the cause. */
export function internalError(why: string): ApiError {
  return statusError(500, "InternalError", `Internal error occurred: ${why}`, { causes: [{ message: why }] });
}
