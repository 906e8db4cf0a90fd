/**
 * The only file that loads the native addon (STYLE §5). It declares the binding's shape; everything else in
 * libs/vmm goes through `binding()`. The migration modules (migration-*.ts) declare their own slice of the binding
 * and read it from `nativeAddon()`, so the two halves of the addon can grow independently.
 */
import { testGuestPath as builtTestGuestPath, loadAddon } from "@kvt/native";
import { VmmError } from "./errors.ts";

/** Arguments of the native event callback, by kind. */
export type NativeEventArgs =
  | [kind: "serial-output", chunk: Uint8Array]
  | [kind: "vcpu-exit", vcpu: number, reason: string, fatal: boolean]
  | [kind: "shutdown", reason: string, code: number]
  | [kind: "device-error", device: string, reason: string];

/** Called on the JS thread for every machine event (vCPU threads never call JS directly). */
export type NativeEventCallback = (...args: NativeEventArgs) => void;

/** Counters of a native VM. */
export interface NativeVmStats {
  exits: number;
  ioExits: number;
  mmioExits: number;
  serialBytesOut: number;
  serialBytesIn: number;
  serialBytesDropped: number;
  kicks: number;
  dirtyLogCollections: number;
  vcpuSeconds: number[];
  diskRequests: number;
  diskReadBytes: number;
  diskWriteBytes: number;
  diskErrors: number;
  diskBroken: number;
  netRxFrames: number;
  netRxBytes: number;
  netTxFrames: number;
  netTxBytes: number;
  netErrors: number;
  netBroken: number;
  netVhost: number;
  netVhostFallbacks: number;
  irqfdRoutes: number;
  irqfdFailures: number;
}

/** One region's dirty pages: bit i of the little-endian u64 words = page i from baseGpa. */
export interface NativeDirtyRegion {
  baseGpa: bigint;
  pages: number;
  dirtyPages: number;
  bitmap: Uint8Array;
}

/** The native handle of one machine (C++ VmObject). Arguments must already be valid. */
export interface NativeVm {
  loadElf(image: Uint8Array, cmdline: string): void;
  start(): void;
  pause(): void;
  resume(): void;
  stop(): void;
  close(): void;
  state(): "created" | "running" | "paused" | "stopped" | "closed";
  writeSerial(data: Uint8Array): void;
  takeSerialOutput(): Uint8Array;
  stats(): NativeVmStats;
  saveState(): Uint8Array;
  restoreState(blob: Uint8Array): void;
  startDirtyLog(): void;
  collectDirty(): Promise<NativeDirtyRegion[]>;
  stopDirtyLog(): void;
  setCpuThrottle(percent: number): void;
  regions(): { baseGpa: bigint; sizeBytes: number }[];
  readMemory(gpa: bigint, length: number): Uint8Array;
  writeMemory(gpa: bigint, data: Uint8Array): void;
}

/** The addon's exports used by this library. */
export interface NativeBinding {
  kvmApiVersion(): number;
  setErrorClass(ctor: typeof VmmError): void;
  NativeVm: new (memoryBytes: number, vcpuCount: number, memfd: boolean, onEvent: NativeEventCallback) => NativeVm;
}

let cached: NativeBinding | undefined;

/** Loads the addon once and hands it the VmmError class. Throws when the addon has not been built. */
export function binding(): NativeBinding {
  if (!cached) {
    const raw = loadAddon() as NativeBinding;
    raw.setErrorClass(VmmError);
    cached = raw;
  }
  return cached;
}

/** The raw exports, for the migration modules' own binding declarations. */
export function nativeAddon(): Readonly<Record<string, unknown>> {
  return binding() as unknown as Readonly<Record<string, unknown>>;
}

/** Absolute path of the test guest ELF built with the addon (see native/guest/workload.c for its parameters). */
export function testGuestPath(): string {
  return builtTestGuestPath;
}
