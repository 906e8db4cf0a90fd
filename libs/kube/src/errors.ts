/**
 * Errors of the plumbing: {@link ApiError} (a failed API call, carrying its `Status`), {@link SyncError}
 * (a reconcile failure whose reason becomes a condition reason, as in KubeVirt) and {@link TerminalError} (never
 * retried, as in controller-runtime).
 */
import type { Status } from "./types.ts";

/**
 * A failed API call, on either side of the wire: a non-2xx answer the client got (`message` names the request), or
 * the answer a server sends (built by the functions of `status.ts`; `message` is the Status message).
 */
export class ApiError extends Error {
  /** HTTP status code. */
  readonly code: number;
  /** `Status.reason` (`NotFound`, `Conflict`, `AlreadyExists`, `Expired`, `Invalid`, ...), or `""`. */
  readonly reason: string;
  /**
   * The Status: the server's body, or, for an answer without one, the Status client-go makes of it; for a server,
   * what it answers. Built from `message` and `code` when not given.
   */
  readonly status: Status;
  constructor(message: string, code: number, status?: Status, options?: ErrorOptions) {
    super(message, options);
    this.name = "ApiError";
    this.code = code;
    this.status = status ?? { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message, code };
    this.reason = this.status.reason ?? "";
  }
}

/**
 * What client-go's `err.Error()` prints: an {@link ApiError}'s Status message (the server's words, without the
 * request this client adds to `message`), any other error's message. For user-facing text and Status messages.
 */
export function errorMessage(error: unknown): string {
  if (error instanceof ApiError) return error.status.message ?? error.message;
  return error instanceof Error ? error.message : String(error);
}

/** True for a 404. */
export function isNotFound(error: unknown): boolean {
  return error instanceof ApiError && error.code === 404;
}
/** True for a 409 Conflict (stale resourceVersion or a failed JSON-patch `test` answered as conflict). */
export function isConflict(error: unknown): boolean {
  return error instanceof ApiError && error.code === 409 && error.reason !== "AlreadyExists";
}
/** True for a 409 AlreadyExists. */
export function isAlreadyExists(error: unknown): boolean {
  return error instanceof ApiError && error.code === 409 && error.reason === "AlreadyExists";
}
/** True for a 410 Gone (`Expired`): a watch or list resourceVersion too old. */
export function isGone(error: unknown): boolean {
  return error instanceof ApiError && error.code === 410;
}
/** True for a 422 Invalid, or a failed JSON-patch `test` (the server answers 422 for those). */
export function isInvalid(error: unknown): boolean {
  return error instanceof ApiError && error.code === 422;
}

/** A reconcile failure with a machine-readable reason (it becomes a condition reason, e.g. `FailedCreate`). */
export class SyncError extends Error {
  /** Short CamelCase reason. */
  readonly reason: string;
  /** Whether the runner should retry the key with backoff (default true). */
  readonly requeue: boolean;
  constructor(reason: string, message: string, options?: ErrorOptions & { requeue?: boolean }) {
    super(message, options);
    this.name = "SyncError";
    this.reason = reason;
    this.requeue = options?.requeue ?? true;
  }
}

/** A failure that retrying cannot fix (bad input): the runner logs it and forgets the key. */
export class TerminalError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "TerminalError";
  }
}
