/**
 * The VM interface both the real `Vm` and the in-memory `FakeVm` implement, and `Vmm`, the factory an app is
 * handed (the native one or a `FakeVmm`), so app tests run without /dev/kvm.
 *
 *   created --start()--> running <--pause()/resume()--> paused
 *      |                    |  \                          |
 *      `---- stop() --------+---`-- guest shutdown ---> stopped <--- stop() ---'
 */
import type { VmEvents } from "./events.ts";
import type { Gpa } from "./gpa.ts";
import type { VmOptions } from "./vm-options.ts";

/** Lifecycle state of a VM. */
export type VmState = "created" | "running" | "paused" | "stopped";

/** Counters of one VM. */
export interface VmStats {
  readonly state: VmState;
  /** All KVM_RUN returns, every vCPU. */
  readonly exits: number;
  readonly ioExits: number;
  readonly mmioExits: number;
  readonly serialBytesOut: number;
  readonly serialBytesIn: number;
  /** Console output dropped because nobody drained it (4 MiB buffer full). */
  readonly serialBytesDropped: number;
  /** vCPU kicks (pause, throttle). */
  readonly kicks: number;
  readonly dirtyLogCollections: number;
  /** CPU seconds used by each vCPU's thread (guest time plus exit handling), by vCPU index. */
  readonly vcpuSeconds: readonly number[];
  /** virtio-blk requests answered (any status), summed over the disks (`boot.disks`); all disk counters 0 without. */
  readonly diskRequests: number;
  readonly diskReadBytes: number;
  readonly diskWriteBytes: number;
  /** Requests answered with an error (I/O error or unsupported). */
  readonly diskErrors: number;
  /** Times a disk stopped on a guest protocol error (each also a "device-error" event). */
  readonly diskBroken: number;
  /** Frames delivered to the guest, summed over the NICs (`boot.nics`); all NIC counters 0 without. */
  readonly netRxFrames: number;
  /** Bytes of those frames (Ethernet frames, no virtio header). */
  readonly netRxBytes: number;
  /** Frames the guest sent that the taps took. */
  readonly netTxFrames: number;
  readonly netTxBytes: number;
  /** Frames dropped: refused by a tap, or cut to fit a receive buffer. */
  readonly netErrors: number;
  /** Times a NIC stopped on a guest protocol error (each also a "device-error" event). */
  readonly netBroken: number;
  /** NICs whose frames the kernel's vhost-net carries now (0 while a migration tracks dirty pages). */
  readonly netVhost: number;
  /** Times a NIC that wanted vhost-net ran its userspace path instead (no /dev/vhost-net, or a feature it lacks). */
  readonly netVhostFallbacks: number;
  /** Device interrupts KVM raises itself now (irqfd on an MSI route: vhost-net's, while their vector is unmasked). */
  readonly irqfdRoutes: number;
  /** Routes KVM refused (those interrupts went through the device's worker instead). */
  readonly irqfdFailures: number;
}

/** The disk counters of a VM without disks. */
export const NO_DISK_STATS = {
  diskRequests: 0,
  diskReadBytes: 0,
  diskWriteBytes: 0,
  diskErrors: 0,
  diskBroken: 0,
} as const satisfies Partial<VmStats>;

/** The NIC counters of a VM without NICs. */
export const NO_NET_STATS = {
  netRxFrames: 0,
  netRxBytes: 0,
  netTxFrames: 0,
  netTxBytes: 0,
  netErrors: 0,
  netBroken: 0,
  netVhost: 0,
  netVhostFallbacks: 0,
  irqfdRoutes: 0,
  irqfdFailures: 0,
} as const satisfies Partial<VmStats>;

/** One memory region's dirty pages since the previous collection. */
export interface DirtyRegion {
  readonly baseGpa: Gpa;
  readonly pages: number;
  readonly dirtyPages: number;
  /** Bit i of the little-endian u64 words = page i (4 KiB) from baseGpa. */
  readonly bitmap: Uint8Array;
}

/** A guest RAM region. */
export interface MemoryRegionInfo {
  readonly baseGpa: Gpa;
  readonly sizeBytes: number;
}

/** One virtual machine. */
export interface VmControl {
  readonly state: VmState;
  /** Starts the vCPUs (after loading a kernel, or after restoreState on a migration target). */
  start(): void;
  /** Stops every vCPU at a consistent point; returns once all have acknowledged and earlier output was emitted. */
  pause(): void;
  resume(): void;
  /** Stops the guest and releases everything (threads, fds, memory). Idempotent. */
  stop(): void;
  /**
   * Linux boots only: presses Ctrl-Alt-Del on the guest's keyboard (the demo image's init powers off). Throws
   * VmmError EAGAIN when the guest has not enabled its keyboard yet.
   */
  sendCtrlAltDel?(): void;
  /** Sends bytes (or UTF-8 text) to the serial console input. */
  writeSerial(data: Uint8Array | string): void;
  stats(): VmStats;
  /** The whole machine state as an opaque versioned blob. Paused only. */
  saveState(): Uint8Array;
  /** Restores a saveState() blob. Created (then start()) or paused (then resume()). */
  restoreState(blob: Uint8Array): void;
  /** Guest RAM layout. */
  regions(): MemoryRegionInfo[];
  /** A bounds-checked copy of guest memory (small ranges; bulk copies belong to the migration stream). */
  readMemory(address: Gpa, length: number): Uint8Array;
  /** Writes guest memory (bounds-checked; the pages count as dirty for the dirty log). */
  writeMemory(address: Gpa, data: Uint8Array): void;
  on<K extends keyof VmEvents>(event: K, listener: VmEvents[K]): this;
  off<K extends keyof VmEvents>(event: K, listener: VmEvents[K]): this;
}

/** Creates VMs: the native VMM, or a fake in tests. */
export interface Vmm {
  create(options: VmOptions): VmControl;
}
