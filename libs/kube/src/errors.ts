/**
 * Errors of the plumbing: {@link ApiError} (a failed API call, carrying the server's `Status`), {@link SyncError}
 * (a reconcile failure whose reason becomes a condition reason, as in KubeVirt) and {@link TerminalError} (never
 * retried, as in controller-runtime).
 */
import type { Status } from "./types.ts";

/** A non-2xx answer from the API server. `status` is the server's `Status` body when it sent one. */
export class ApiError extends Error {
  /** HTTP status code. */
  readonly code: number;
  /** `Status.reason` (`NotFound`, `Conflict`, `AlreadyExists`, `Expired`, `Invalid`, ...), or `""`. */
  readonly reason: string;
  /** The server's Status body. */
  readonly status: Status | undefined;
  constructor(message: string, code: number, status?: Status, options?: ErrorOptions) {
    super(message, options);
    this.name = "ApiError";
    this.code = code;
    this.reason = status?.reason ?? "";
    this.status = status;
  }
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
