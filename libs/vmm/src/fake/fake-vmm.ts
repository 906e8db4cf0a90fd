/**
 * FakeVmm: VMs in memory for app tests (KubeVirt's fake-qemu-process): the same `VmControl` lifecycle, events and
 * errors as the real `Vm`, no /dev/kvm. The fake guest prints `fake-guest start` when started, echoes console
 * input lines as `fake-guest input <line>`, and stops when a test calls `guestExit(code)`.
 */
import { VmmError } from "../errors.ts";
import { type ShutdownReason, TypedEmitter, type VmEvents } from "../events.ts";
import type { Gpa } from "../gpa.ts";
import { gpa } from "../gpa.ts";
import {
  type MemoryRegionInfo,
  NO_DISK_STATS,
  NO_NET_STATS,
  type VmControl,
  type Vmm,
  type VmState,
  type VmStats,
} from "../vm-control.ts";
import { type ParsedVmOptions, parseVmOptions, type VmOptions } from "../vm-options.ts";

const encoder = new TextEncoder();

/** An in-memory VM. */
export class FakeVm extends TypedEmitter<VmEvents> implements VmControl {
  readonly options: ParsedVmOptions;
  #state: VmState = "created";
  #restored = false;
  #input = "";
  #bytesOut = 0;
  #bytesIn = 0;

  constructor(options: VmOptions) {
    super();
    this.options = parseVmOptions(options);
  }

  get state(): VmState {
    return this.#state;
  }

  #require(op: string, ...states: VmState[]): void {
    if (!states.includes(this.#state)) {
      throw new VmmError(`${op}: EINVAL (machine is ${this.#state})`, { code: "EINVAL", errno: 22, syscall: op });
    }
  }

  start(): void {
    this.#require("start", "created");
    if (!this.options.kernel && !this.options.boot && !this.#restored) {
      throw new VmmError("start: EINVAL (no guest loaded and no state restored)", {
        code: "EINVAL",
        errno: 22,
        syscall: "start",
      });
    }
    this.#state = "running";
    queueMicrotask(() => this.output("fake-guest start\n"));
  }

  pause(): void {
    if (this.#state === "paused") return;
    this.#require("pause", "running");
    this.#state = "paused";
  }

  resume(): void {
    if (this.#state === "running") return;
    this.#require("resume", "paused");
    this.#state = "running";
  }

  stop(): void {
    this.#state = "stopped";
  }

  writeSerial(data: Uint8Array | string): void {
    const text = typeof data === "string" ? data : new TextDecoder().decode(data);
    this.#bytesIn += encoder.encode(text).length;
    this.#input += text;
    let nl = this.#input.search(/[\r\n]/);
    while (nl >= 0) {
      const line = this.#input.slice(0, nl);
      this.#input = this.#input.slice(nl + 1);
      if (this.#state === "running") this.output(`fake-guest input ${line}\n`);
      nl = this.#input.search(/[\r\n]/);
    }
  }

  stats(): VmStats {
    return {
      state: this.#state,
      exits: 0,
      ioExits: 0,
      mmioExits: 0,
      serialBytesOut: this.#bytesOut,
      serialBytesIn: this.#bytesIn,
      serialBytesDropped: 0,
      kicks: 0,
      dirtyLogCollections: 0,
      vcpuSeconds: this.options.vcpus > 0 ? Array.from({ length: this.options.vcpus }, () => 0) : [],
      ...NO_DISK_STATS,
      ...NO_NET_STATS,
    };
  }

  saveState(): Uint8Array {
    this.#require("save-state", "paused");
    return encoder.encode(JSON.stringify({ fake: 1, bytesOut: this.#bytesOut }));
  }

  restoreState(blob: Uint8Array): void {
    this.#require("restore-state", "created", "paused");
    try {
      const parsed = JSON.parse(new TextDecoder().decode(blob)) as { fake?: number; bytesOut?: number };
      if (parsed.fake !== 1) throw new Error("not a fake state");
      this.#bytesOut = parsed.bytesOut ?? 0;
    } catch {
      throw new VmmError("restore-state: EINVAL (bad magic)", { code: "EINVAL", errno: 22, syscall: "restore-state" });
    }
    this.#restored = true;
  }

  regions(): MemoryRegionInfo[] {
    return [{ baseGpa: gpa(0), sizeBytes: this.options.memoryBytes }];
  }

  readMemory(address: Gpa, length: number): Uint8Array {
    if (address + BigInt(length) > BigInt(this.options.memoryBytes)) {
      throw new VmmError("guest-memory: EFAULT (read outside RAM)", {
        code: "EFAULT",
        errno: 14,
        syscall: "guest-memory",
      });
    }
    return new Uint8Array(length);
  }

  writeMemory(address: Gpa, data: Uint8Array): void {
    this.readMemory(address, data.length);
  }

  /** Test hook: the guest writes `text` to its console. */
  output(text: string): void {
    if (this.#state !== "running") return;
    const bytes = encoder.encode(text);
    this.#bytesOut += bytes.length;
    this.emit("serial-output", bytes);
  }

  /** Linux boots: the fake guest powers off on Ctrl-Alt-Del, as the demo image's init does (guest-exit 0). */
  sendCtrlAltDel(): void {
    this.#require("sendCtrlAltDel", "running");
    if (!this.options.boot) {
      throw new VmmError("ctrl-alt-del: EINVAL (not a Linux boot)", {
        code: "EINVAL",
        errno: 22,
        syscall: "ctrl-alt-del",
      });
    }
    queueMicrotask(() => this.guestExit(0));
  }

  /** Test hook: the guest stops by itself. */
  guestExit(code: number, reason: ShutdownReason = "guest-exit"): void {
    if (this.#state === "stopped") return;
    this.#state = "stopped";
    this.emit("shutdown", { reason, code });
  }
}

/** A Vmm whose VMs are FakeVms; `vms` lists every VM created, for assertions. */
export class FakeVmm implements Vmm {
  readonly vms: FakeVm[] = [];

  create(options: VmOptions): FakeVm {
    const vm = new FakeVm(options);
    this.vms.push(vm);
    return vm;
  }
}
