/** Errors for non-2xx answers of the API server, worded as client-go's. */

/** A Kubernetes Status as the server sent it. */
export interface StatusBody {
  readonly kind?: string;
  readonly message?: string;
  readonly reason?: string;
  readonly code?: number;
}

/** A non-2xx answer; `message` is what client-go's `StatusError.Error()` would print. */
export class ApiStatusError extends Error {
  readonly code: number;
  readonly reason: string;
  /** What to check next (401/403: the credentials or permissions of the context in use), printed after `message`. */
  readonly hint: string | undefined;
  constructor(code: number, reason: string, message: string, hint?: string) {
    super(message);
    this.name = "ApiStatusError";
    this.code = code;
    this.reason = reason;
    this.hint = hint;
  }
}

/** True for a 404 answer. */
export function isNotFound(error: unknown): boolean {
  return error instanceof ApiStatusError && error.code === 404;
}

/** The error for a non-2xx answer `code` with body `text`, as client-go words it; `hint` as given. */
export function statusFrom(code: number, text: string, hint?: string): ApiStatusError {
  try {
    const body = JSON.parse(text) as StatusBody;
    if (body.kind === "Status" && body.message) return new ApiStatusError(code, body.reason ?? "", body.message, hint);
  } catch {
    // not a Status: fall through to client-go's generic texts
  }
  if (code === 404)
    return new ApiStatusError(code, "NotFound", "the server could not find the requested resource", hint);
  if (code === 401) return new ApiStatusError(code, "Unauthorized", "Unauthorized", hint);
  if (code === 403) return new ApiStatusError(code, "Forbidden", `forbidden: ${text.trim()}`, hint);
  return new ApiStatusError(
    code,
    "InternalError",
    `an error on the server ("${text.trim()}") has prevented the request from succeeding`,
    hint,
  );
}
