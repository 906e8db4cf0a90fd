/** The error of a device plugin API call, on either side. */
import { status } from "@grpc/grpc-js";

/** A failed device plugin API call; `code` is the gRPC status code (2 UNKNOWN for a plain error, as in Go). */
export class DevicePluginError extends Error {
  override readonly name = "DevicePluginError";
  readonly code: number;

  constructor(message: string, options: { code?: number; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = options.code ?? status.UNKNOWN;
  }

  /** The status code's name (`UNAVAILABLE`, `DEADLINE_EXCEEDED`, ...). */
  get codeName(): string {
    return status[this.code] ?? String(this.code);
  }
}
