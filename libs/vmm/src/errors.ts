/**
 * Errors of the VMM layer. A `VmmError` names the failed operation the way the kernel would: message
 * `KVM_SET_USER_MEMORY_REGION: EEXIST`, with `syscall` (the ioctl or call), `code` (the errno name) and `errno`.
 * The native addon constructs them directly (native.ts hands it this class), so `instanceof VmmError` holds for
 * every error that crosses the boundary.
 */

/** Fields of a VmmError besides the message. */
export interface VmmErrorFields {
  /** errno name, e.g. "EEXIST"; "EVMM" when the failure has no errno. */
  readonly code: string;
  /** errno value (positive), or 0. */
  readonly errno: number;
  /** The failed operation verbatim: an ioctl ("KVM_CREATE_VM"), a syscall ("mmap") or a VMM step ("restore-state"). */
  readonly syscall: string;
}

/** A failure inside the VMM or the kernel calls it makes. */
export class VmmError extends Error {
  code: string;
  errno: number;
  syscall: string;

  constructor(message: string, fields?: VmmErrorFields) {
    super(message);
    this.name = "VmmError";
    this.code = fields?.code ?? "EVMM";
    this.errno = fields?.errno ?? 0;
    this.syscall = fields?.syscall ?? "";
  }
}

/**
 * Re-throws a native error with the caller's stack (sharp's `nativeError`): the message and fields stay, the
 * stack points at the call site in TypeScript instead of the addon boundary.
 */
export function withCallSite(native: unknown, callSite: Error): never {
  if (native instanceof VmmError) {
    const e = new VmmError(native.message, native);
    e.stack = `VmmError: ${native.message}\n${(callSite.stack ?? "").split("\n").slice(1).join("\n")}`;
    throw e;
  }
  throw native;
}
