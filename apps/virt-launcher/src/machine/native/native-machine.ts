/**
 * The native backend: a {@link Machine} over @kvt/vmm's Vm (our KVM VMM). The mapping:
 *
 *   Machine            Vm                       notes
 *   start()            Vm.create + start()      64-bit ELF (PVH) kernels, e.g. the test guest; no initrd
 *   pause()/resume()   pause()/resume()         synchronous, at a consistent point
 *   shutdown(grace)    stop()                   no ACPI power button in this VMM: nothing to ask, so it stops
 *                                               at once (reason says so) instead of idling out the grace period
 *   kill()             stop()                   crashed, reason Killed
 *   console            serial-output/writeSerial scrollback kept here (bounded)
 *   Vm "shutdown"      guest-exit -> stopped (GuestShutdown, code);  reset/triple-fault/fatal-exit -> crashed
 *   migration          not yet: libs/vmm exports no migration API, so the VMI is LiveMigratable=False
 */
import { EventEmitter } from "node:events";
import type { Logger } from "@kvt/observability";
import type { ShutdownEvent, VcpuExitEvent, VmControl, Vmm } from "@kvt/vmm";
import {
  type Machine,
  type MachineEvents,
  type MachineSpec,
  type MachineState,
  type MachineStats,
  MachineUnsupportedError,
  type MigrationResult,
  type MigrationTarget,
} from "../machine.ts";

/** Bytes of console output kept for clients that attach late. */
export const SCROLLBACK_BYTES = 256 * 1024;

const NO_MIGRATION = "live migration on the native VMM is not available yet (libs/vmm has no migration API)";

/** Checks, before anything is allocated, that the native VMM can boot `spec`; throws MachineUnsupportedError. */
export function assertNativeBootable(spec: MachineSpec): void {
  if (spec.boot.initrdPath) {
    throw new MachineUnsupportedError(
      `the native VMM boots 64-bit ELF (PVH) kernels without an initramfs; ${spec.boot.kernelPath} comes with one`,
    );
  }
}

/** A guest run by our VMM. */
export class NativeMachine implements Machine {
  readonly backend = "native" as const;
  readonly notMigratableReason = NO_MIGRATION;
  readonly #spec: MachineSpec;
  readonly #vmm: Vmm;
  readonly #log: Logger;
  readonly #events = new EventEmitter();
  #vm: VmControl | undefined;
  #state: MachineState = "created";
  #scrollback: Uint8Array[] = [];
  #scrollbackBytes = 0;
  #startedAt = 0;

  constructor(spec: MachineSpec, vmm: Vmm, logger: Logger) {
    assertNativeBootable(spec);
    this.#spec = spec;
    this.#vmm = vmm;
    this.#log = logger.child({ vmi: spec.vmiKey, backend: "native" });
  }

  get state(): MachineState {
    return this.#state;
  }

  async start(): Promise<void> {
    if (this.#state !== "created") throw new Error(`Cannot start a ${this.#state} machine`);
    const vm = this.#vmm.create({
      memoryBytes: this.#spec.memoryBytes,
      vcpus: this.#spec.vcpus,
      kernel: { path: this.#spec.boot.kernelPath, cmdline: this.#spec.boot.cmdline },
    });
    this.#vm = vm;
    vm.on("serial-output", (chunk) => this.#onSerial(chunk));
    vm.on("shutdown", (event) => this.#onShutdown(event));
    vm.on("vcpu-exit", (event) => this.#onVcpuExit(event));
    if (this.#spec.cloudInit) this.#log.debug("the native guest reads no cloud-init seed; user data ignored");
    vm.start();
    this.#startedAt = Date.now();
    this.#set("running");
  }

  async pause(): Promise<void> {
    this.#require("running").pause();
    this.#set("paused");
  }

  async resume(): Promise<void> {
    this.#require("paused").resume();
    this.#set("running");
  }

  async shutdown(_gracePeriodMs: number): Promise<void> {
    if (!this.#live()) return;
    this.#vm?.stop();
    this.#set("stopped", "GuestShutdown: stopped at once (the native VMM has no ACPI power button)");
  }

  async kill(): Promise<void> {
    if (!this.#live()) return;
    this.#vm?.stop();
    this.#set("crashed", "Killed");
  }

  async softReboot(): Promise<void> {
    throw new MachineUnsupportedError("soft reboot needs ACPI or a guest agent; the native VMM guest has neither");
  }

  writeConsole(data: Uint8Array): void {
    if (this.#live()) this.#vm?.writeSerial(data);
  }

  consoleScrollback(): Uint8Array {
    return Buffer.concat(this.#scrollback);
  }

  async stats(): Promise<MachineStats> {
    const running = this.#state === "running" && this.#startedAt > 0;
    // The VMM counts exits, not per-vCPU run time: wall time while running is the upper bound reported here.
    const seconds = running ? (Date.now() - this.#startedAt) / 1000 : 0;
    return {
      state: this.#state,
      vcpuSeconds: Array.from({ length: this.#spec.vcpus }, () => seconds),
      memoryBytes: this.#spec.memoryBytes,
    };
  }

  async prepareIncoming(): Promise<MigrationTarget> {
    throw new MachineUnsupportedError(NO_MIGRATION);
  }

  async migrateTo(): Promise<MigrationResult> {
    throw new MachineUnsupportedError(NO_MIGRATION);
  }

  async cancelMigration(): Promise<void> {}

  on<E extends keyof MachineEvents>(event: E, listener: MachineEvents[E]): void {
    this.#events.on(event, listener);
  }

  off<E extends keyof MachineEvents>(event: E, listener: MachineEvents[E]): void {
    this.#events.off(event, listener);
  }

  #onSerial(chunk: Uint8Array): void {
    this.#scrollback.push(chunk);
    this.#scrollbackBytes += chunk.byteLength;
    while (this.#scrollbackBytes > SCROLLBACK_BYTES && this.#scrollback.length > 1) {
      this.#scrollbackBytes -= this.#scrollback.shift()!.byteLength;
    }
    this.#events.emit("console", chunk);
  }

  #onShutdown(event: ShutdownEvent): void {
    if (!this.#live()) return;
    // The Vm already halted its vCPUs; release its memory and threads outside the native callback.
    setImmediate(() => this.#vm?.stop());
    if (event.reason === "guest-exit") this.#set("stopped", `GuestShutdown: exit code ${event.code}`);
    else this.#set("crashed", `guest ${event.reason} (code ${event.code})`);
  }

  #onVcpuExit(event: VcpuExitEvent): void {
    // Fatal exits are followed by a "shutdown" event (fatal-exit); keep the precise reason for the log.
    if (event.fatal) this.#log.warn({ vcpu: event.vcpu, reason: event.reason }, "fatal vCPU exit");
  }

  #live(): boolean {
    return this.#state === "running" || this.#state === "paused";
  }

  #require(state: MachineState): VmControl {
    if (this.#state !== state || !this.#vm)
      throw new MachineUnsupportedError(`the machine is ${this.#state}, not ${state}`);
    return this.#vm;
  }

  #set(state: MachineState, reason?: string): void {
    this.#state = state;
    this.#events.emit("state", state, reason);
  }
}
