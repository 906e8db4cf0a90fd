/** Typed errors of the launcher protocol, shared by client and server. */
import { ERROR_STATUS, type LauncherErrorCode } from "./protocol.ts";

/**
 * A request to a launcher failed. `code` says how (`Conflict`: wrong domain state; `DeadlineExceeded`: the deadline
 * passed; `Unavailable`: nothing listens on the socket or the connection broke). Services throw it to choose the
 * status; the client throws it for every failure.
 */
export class LauncherRpcError extends Error {
  override readonly name = "LauncherRpcError";
  readonly code: LauncherErrorCode;
  /** The HTTP status the error travels with. */
  readonly status: number;
  constructor(code: LauncherErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.status = ERROR_STATUS[code];
  }
}

/** True if `value` is a known error code. */
export function isLauncherErrorCode(value: unknown): value is LauncherErrorCode {
  return typeof value === "string" && Object.hasOwn(ERROR_STATUS, value);
}
