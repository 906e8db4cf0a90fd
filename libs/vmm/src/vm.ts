/**
 * `Vm`: one KVM guest run by the native addon (STYLE §5). Options are validated here; the native handle lives in
 * a #private field; errors are `VmmError`s naming the failed operation; events are typed (events.ts).
 *
 *   const vm = Vm.create({ memoryBytes: 256 << 20, kernel: { path: testGuestPath(), cmdline: "ws=16 lines=3" } });
 *   vm.on("serial-output", (chunk) => process.stdout.write(chunk));
 *   vm.on("shutdown", ({ reason, code }) => console.log(reason, code));
 *   vm.start();
 */
import { readFileSync } from "node:fs";
import { withCallSite } from "./errors.ts";
import { type ShutdownReason, TypedEmitter, type VmEvents } from "./events.ts";
import { type Gpa, gpa } from "./gpa.ts";
import { createLinuxNativeVm, loadLinuxBoot, sendCtrlAltDelTo } from "./linux-boot.ts";
import { binding, type NativeEventArgs, type NativeVm } from "./native.ts";
import {
  type DirtyRegion,
  type MemoryRegionInfo,
  NO_DISK_STATS,
  NO_NET_STATS,
  type VmControl,
  type Vmm,
  type VmState,
  type VmStats,
} from "./vm-control.ts";
import { parseVmOptions, type VmOptions } from "./vm-options.ts";

let nativeOf: (vm: Vm) => NativeVm;

/** A virtual machine on /dev/kvm. */
export class Vm extends TypedEmitter<VmEvents> implements VmControl {
  readonly #native: NativeVm;
  #stopped = false;

  static {
    nativeOf = (vm) => vm.#native;
  }

  private constructor(native: NativeVm) {
    super();
    this.#native = native;
  }

  /**
   * Creates the machine (VM fd, memory, vCPUs, devices) and loads `options.kernel` if given. Synchronous: a few
   * milliseconds. Throws TypeError/RangeError for bad options, VmmError when KVM refuses.
   */
  static create(options: VmOptions): Vm {
    const o = parseVmOptions(options);
    const callSite = new Error();
    const holder: { vm?: Vm } = {};
    const onEvent = (...args: NativeEventArgs): void => {
      if (holder.vm) holder.vm.#onNative(args);
    };
    let native: NativeVm;
    try {
      native = o.boot
        ? createLinuxNativeVm(o.memoryBytes, o.vcpus, o.memoryBacking === "memfd", onEvent, o.boot)
        : new (binding().NativeVm)(o.memoryBytes, o.vcpus, o.memoryBacking === "memfd", onEvent);
    } catch (e) {
      return withCallSite(e, callSite);
    }
    const vm = new Vm(native);
    holder.vm = vm;
    if (o.boot) {
      try {
        loadLinuxBoot(native, o.boot);
      } catch (e) {
        native.close();
        return withCallSite(e, callSite);
      }
    }
    if (o.kernel) {
      const image = o.kernel.image ?? readFileSync(o.kernel.path ?? "");
      try {
        native.loadElf(image, o.kernel.cmdline ?? "");
      } catch (e) {
        native.close();
        return withCallSite(e, callSite);
      }
    }
    return vm;
  }

  #onNative(args: NativeEventArgs): void {
    switch (args[0]) {
      case "serial-output":
        this.emit("serial-output", args[1]);
        return;
      case "vcpu-exit":
        this.emit("vcpu-exit", { vcpu: args[1], reason: args[2], fatal: args[3] });
        return;
      case "shutdown":
        this.#native.stop();
        this.emit("shutdown", { reason: args[1] as ShutdownReason, code: args[2] });
        return;
      case "device-error":
        this.emit("device-error", { device: args[1], reason: args[2] });
        return;
    }
  }

  #call<T>(fn: () => T): T {
    try {
      return fn();
    } catch (e) {
      return withCallSite(e, new Error());
    }
  }

  /** Current lifecycle state. */
  get state(): VmState {
    const s = this.#native.state();
    return s === "closed" ? "stopped" : s;
  }

  /** Starts the vCPUs. */
  start(): void {
    this.#call(() => this.#native.start());
  }

  /**
   * Pauses every vCPU at a consistent point (synchronous: returns when all acknowledged). Every byte the guest
   * wrote before the pause has been emitted as "serial-output" when it returns.
   */
  pause(): void {
    this.#call(() => this.#native.pause());
    this.#flushSerial();
  }

  #flushSerial(): void {
    const chunk = this.#native.takeSerialOutput();
    if (chunk.length > 0) this.emit("serial-output", chunk);
  }

  /** Resumes a paused guest. */
  resume(): void {
    this.#call(() => this.#native.resume());
  }

  /** Stops the guest and releases its threads, fds and memory. Idempotent. */
  stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#native.stop();
    this.#flushSerial();
    this.#native.close();
  }

  /** Linux boots: Ctrl-Alt-Del on the guest's PS/2 keyboard (linux-boot.ts). VmmError EAGAIN before the guest enabled it. */
  sendCtrlAltDel(): void {
    this.#call(() => sendCtrlAltDelTo(this.#native));
  }

  /** Sends console input to the guest's UART (its 64-byte FIFO; excess is dropped, as on hardware). */
  writeSerial(data: Uint8Array | string): void {
    const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
    this.#call(() => this.#native.writeSerial(bytes));
  }

  /** Counters. */
  stats(): VmStats {
    if (this.#stopped) {
      return {
        state: "stopped",
        exits: 0,
        ioExits: 0,
        mmioExits: 0,
        serialBytesOut: 0,
        serialBytesIn: 0,
        serialBytesDropped: 0,
        kicks: 0,
        dirtyLogCollections: 0,
        vcpuSeconds: [],
        ...NO_DISK_STATS,
        ...NO_NET_STATS,
      };
    }
    return { state: this.state, ...this.#call(() => this.#native.stats()) };
  }

  /** The machine state (vCPUs, devices, clock) as a versioned blob. The VM must be paused. */
  saveState(): Uint8Array {
    return this.#call(() => this.#native.saveState());
  }

  /** Restores a saveState() blob into a created or paused VM. */
  restoreState(blob: Uint8Array): void {
    if (!(blob instanceof Uint8Array)) throw new TypeError("restoreState expects a Uint8Array");
    this.#call(() => this.#native.restoreState(blob));
  }

  /** Starts KVM dirty-page logging (plus the pages the VMM itself writes). */
  startDirtyLog(): void {
    this.#call(() => this.#native.startDirtyLog());
  }

  /**
   * The pages dirtied since startDirtyLog() or the previous collection, per region: KVM's log merged with the pages
   * the VMM wrote. Collected off the JS thread.
   */
  async collectDirty(): Promise<DirtyRegion[]> {
    const callSite = new Error();
    try {
      const regions = await this.#native.collectDirty();
      return regions.map((r) => ({ ...r, baseGpa: gpa(r.baseGpa) }));
    } catch (e) {
      return withCallSite(e, callSite);
    }
  }

  /** Stops dirty-page logging. */
  stopDirtyLog(): void {
    this.#call(() => this.#native.stopDirtyLog());
  }

  /** Auto-converge: each vCPU sleeps `percent` (0..99) of every 10 ms. */
  setCpuThrottle(percent: number): void {
    if (!Number.isInteger(percent) || percent < 0 || percent > 99) {
      throw new RangeError(`throttle percent must be an integer in [0, 99], got ${percent}`);
    }
    this.#call(() => this.#native.setCpuThrottle(percent));
  }

  /** Guest RAM layout. */
  regions(): MemoryRegionInfo[] {
    return this.#call(() => this.#native.regions()).map((r) => ({ baseGpa: gpa(r.baseGpa), sizeBytes: r.sizeBytes }));
  }

  /** A copy of guest memory [address, address+length); VmmError EFAULT outside RAM. */
  readMemory(address: Gpa, length: number): Uint8Array {
    if (!Number.isSafeInteger(length) || length < 0 || length > 2 ** 30) {
      throw new RangeError(`length must be an integer in [0, 1 GiB], got ${length}`);
    }
    return this.#call(() => this.#native.readMemory(address, length));
  }

  /** Writes guest memory [address, address+data.length); the pages count as VMM-dirtied. */
  writeMemory(address: Gpa, data: Uint8Array): void {
    if (!(data instanceof Uint8Array)) throw new TypeError("writeMemory expects a Uint8Array");
    this.#call(() => this.#native.writeMemory(address, data));
  }
}

/** The native handle of a Vm, for the migration modules of this library (not exported from the barrel). */
export function nativeVmOf(vm: Vm): NativeVm {
  return nativeOf(vm);
}

/** The Vmm that creates real VMs. */
export const nativeVmm: Vmm = { create: (options) => Vm.create(options) };
