import { parseLinuxBoot, type VmLinuxBoot } from "./linux-boot.ts";

/**
 * VM options and their validation (better-sqlite3's lib/database.js: validate in TS, hand C++ positional
 * arguments that are already valid). TypeError for a wrong type, RangeError for a value out of range.
 */

/** How guest RAM is mapped: private anonymous memory, or a memfd (shareable, spliceable). */
export type MemoryBacking = "anonymous" | "memfd";

/** What to boot: a 64-bit ELF (PVH-style, such as the test guest) by path or as bytes, and its command line. */
export interface VmKernel {
  readonly path?: string;
  readonly image?: Uint8Array;
  readonly cmdline?: string;
}

/** Options of `Vm.create`. */
export interface VmOptions {
  /** Guest RAM in bytes: a multiple of 4096, at least 16 MiB. */
  readonly memoryBytes: number;
  /** vCPUs, 1..64 (default 1). */
  readonly vcpus?: number;
  /** Default "anonymous". */
  readonly memoryBacking?: MemoryBacking;
  /** The guest to load. Omit it on a migration target: memory and state arrive from the source. */
  readonly kernel?: VmKernel;
  /** Direct Linux boot of a bzImage + initramfs (linux-boot.ts); exclusive with `kernel`. */
  readonly boot?: VmLinuxBoot;
}

/** Validated options, every default filled in. */
export interface ParsedVmOptions {
  readonly memoryBytes: number;
  readonly vcpus: number;
  readonly memoryBacking: MemoryBacking;
  readonly kernel?: VmKernel;
  readonly boot?: VmLinuxBoot;
}

/** Smallest guest: the test guest places its working set at 16 MiB. */
export const MIN_MEMORY_BYTES = 16 * 1024 * 1024;
/** Largest guest this layer accepts (1 TiB). */
export const MAX_MEMORY_BYTES = 2 ** 40;
/** Longest kernel command line (the boot page holds 3 KiB). */
export const MAX_CMDLINE_BYTES = 3071;

/** Validates VM options. */
export function parseVmOptions(options: VmOptions): ParsedVmOptions {
  if (typeof options !== "object" || options === null) throw new TypeError("VM options must be an object");
  const { memoryBytes, vcpus = 1, memoryBacking = "anonymous", kernel } = options;
  if (typeof memoryBytes !== "number" || !Number.isSafeInteger(memoryBytes)) {
    throw new TypeError(`memoryBytes must be an integer, got ${String(memoryBytes)}`);
  }
  if (memoryBytes < MIN_MEMORY_BYTES || memoryBytes > MAX_MEMORY_BYTES || memoryBytes % 4096 !== 0) {
    throw new RangeError(`memoryBytes must be a multiple of 4096 in [16 MiB, 1 TiB], got ${memoryBytes}`);
  }
  if (typeof vcpus !== "number" || !Number.isInteger(vcpus)) throw new TypeError("vcpus must be an integer");
  if (vcpus < 1 || vcpus > 64) throw new RangeError(`vcpus must be in [1, 64], got ${vcpus}`);
  if (memoryBacking !== "anonymous" && memoryBacking !== "memfd") {
    throw new RangeError(`memoryBacking must be "anonymous" or "memfd", got ${String(memoryBacking)}`);
  }
  if (kernel !== undefined) {
    if (typeof kernel !== "object" || kernel === null) throw new TypeError("kernel must be an object");
    if ((kernel.path === undefined) === (kernel.image === undefined)) {
      throw new TypeError("kernel needs exactly one of path or image");
    }
    if (kernel.path !== undefined && typeof kernel.path !== "string")
      throw new TypeError("kernel.path must be a string");
    if (kernel.image !== undefined && !(kernel.image instanceof Uint8Array)) {
      throw new TypeError("kernel.image must be a Uint8Array");
    }
    if (kernel.cmdline !== undefined) {
      if (typeof kernel.cmdline !== "string") throw new TypeError("kernel.cmdline must be a string");
      if (new TextEncoder().encode(kernel.cmdline).length > MAX_CMDLINE_BYTES) {
        throw new RangeError(`kernel.cmdline must be at most ${MAX_CMDLINE_BYTES} bytes`);
      }
    }
  }
  if (options.boot !== undefined && kernel !== undefined) throw new TypeError("give kernel or boot, not both");
  const boot = options.boot === undefined ? undefined : parseLinuxBoot(options.boot);
  return { memoryBytes, vcpus, memoryBacking, ...(kernel ? { kernel } : {}), ...(boot ? { boot } : {}) };
}
