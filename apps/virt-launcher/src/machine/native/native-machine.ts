/**
 * The native backend: a {@link Machine} over @kvt/vmm's Vm (our KVM VMM). The mapping:
 *
 *   Machine            Vm                       notes
 *   start()            Vm.create + start()      64-bit ELF (PVH) kernels such as the test guest, or Linux
 *                                               (bzImage + initramfs + the NoCloud seed: boot-options.ts)
 *   pause()/resume()   pause()/resume()         synchronous, at a consistent point
 *   shutdown(grace)    Linux: sendCtrlAltDel()  the guest's init powers off (ACPI S5 -> guest-exit 0); stop()
 *                      then stop() at grace     when it has not within the grace period
 *                      ELF guests: stop()       nothing to ask: stops at once (reason says so)
 *   kill()             stop()                   crashed, reason Killed
 *   console            serial-output/writeSerial scrollback kept here (bounded), across guest reboots
 *   Vm "shutdown"      guest-exit -> stopped (GuestShutdown, code);  Linux reset -> a new Vm boots the same
 *                      spec (guest reboot);  ELF reset/triple-fault/fatal-exit -> crashed
 *   prepareIncoming()  Vm.create, not started    native-migration.ts (@kvt/migration): the target receives,
 *   migrateTo()        OutgoingMigration         then starts the guest; the source stops its Vm only after the
 *   cancelMigration()  cancel()                  target confirmed (state stopped, reason "migrated")
 */
import { EventEmitter } from "node:events";
import type { Logger } from "@kvt/observability";
import type { ShutdownEvent, VcpuExitEvent, VmControl, Vmm, VmOptions } from "@kvt/vmm";
import {
  type IncomingOptions,
  type Machine,
  type MachineEvents,
  type MachineSpec,
  type MachineState,
  type MachineStats,
  MachineUnsupportedError,
  type MigrationOptions,
  type MigrationResult,
  type MigrationTarget,
  type StartOptions,
} from "../machine.ts";
import { isLinuxBoot, nativeBootOptions } from "./boot-options.ts";
import { incomingVmOptions, NativeMigration } from "./native-migration.ts";

/** Bytes of console output kept for clients that attach late. */
export const SCROLLBACK_BYTES = 256 * 1024;

/** Checks, before anything is allocated, that the native VMM can boot `spec`; throws MachineUnsupportedError. */
export function assertNativeBootable(spec: MachineSpec): void {
  try {
    isLinuxBoot(spec);
  } catch (err) {
    throw new MachineUnsupportedError(`cannot read the kernel ${spec.boot.kernelPath}: ${(err as Error).message}`);
  }
}

/** A guest run by our VMM. */
export class NativeMachine implements Machine {
  readonly backend = "native" as const;
  readonly #spec: MachineSpec;
  readonly #vmm: Vmm;
  readonly #log: Logger;
  readonly #events = new EventEmitter();
  #vm: VmControl | undefined;
  #state: MachineState = "created";
  #scrollback: Uint8Array[] = [];
  #scrollbackBytes = 0;
  #startedAt = 0;
  /** The Vm of a guest started paused, until its first resume(). */
  #notYetStarted: VmControl | undefined;
  #bootOptions: VmOptions | undefined;
  #reboots = 0;
  readonly #migration: NativeMigration;

  /**
   * `migrationHost`/`migrationPort`: where an incoming migration listens (default 127.0.0.1 and any port; the pod's
   * IP and KubeVirt's migration port on a pod network).
   */
  constructor(spec: MachineSpec, vmm: Vmm, logger: Logger, migrationHost?: string, migrationPort?: number) {
    assertNativeBootable(spec);
    this.#spec = spec;
    this.#vmm = vmm;
    this.#log = logger.child({ vmi: spec.vmiKey, backend: "native" });
    this.#migration = new NativeMigration(this.#log, migrationHost, migrationPort);
  }

  get state(): MachineState {
    return this.#state;
  }

  async start(options: StartOptions = {}): Promise<void> {
    if (this.#state !== "created") throw new Error(`Cannot start a ${this.#state} machine`);
    this.#bootOptions = nativeBootOptions(this.#spec);
    if ((this.#spec.disks ?? []).length > 0 && !this.#bootOptions.boot) {
      this.#log.debug("an ELF guest has no PCI bus: its cloud-init disk is not attached");
    }
    if (options.paused) {
      // Created, never started: the vCPU threads first run on resume().
      this.#notYetStarted = this.#attach(this.#vmm.create(this.#bootOptions));
      this.#set("paused");
      return;
    }
    this.#boot(this.#bootOptions);
    this.#startedAt = Date.now();
    this.#set("running");
  }

  /** Creates and starts a Vm for `options`, its events wired to this machine. */
  #boot(options: VmOptions): void {
    this.#attach(this.#vmm.create(options)).start();
  }

  /** Makes `vm` this machine's Vm, its events wired here. */
  #attach(vm: VmControl): VmControl {
    this.#vm = vm;
    vm.on("serial-output", (chunk) => this.#onSerial(chunk));
    vm.on("shutdown", (event) => this.#onShutdown(vm, event));
    vm.on("vcpu-exit", (event) => this.#onVcpuExit(event));
    return vm;
  }

  async pause(): Promise<void> {
    this.#require("running").pause();
    this.#set("paused");
  }

  async resume(): Promise<void> {
    const vm = this.#require("paused");
    if (vm === this.#notYetStarted) {
      this.#notYetStarted = undefined;
      vm.start();
      this.#startedAt = Date.now();
    } else {
      vm.resume();
    }
    this.#set("running");
  }

  async shutdown(gracePeriodMs: number): Promise<void> {
    if (!this.#live()) return;
    const vm = this.#vm;
    if (this.#bootOptions?.boot && vm?.sendCtrlAltDel && this.#state === "running") {
      try {
        vm.sendCtrlAltDel();
        if (await this.#stoppedWithin(gracePeriodMs)) return;
        this.#log.warn({ gracePeriodMs }, "the guest did not power off after Ctrl-Alt-Del; stopping it");
      } catch (err) {
        // EAGAIN: the guest has not enabled its keyboard (still booting); nothing to ask, so stop it.
        this.#log.info({ err }, "Ctrl-Alt-Del not delivered; stopping the guest");
      }
    }
    if (!this.#live()) return;
    this.#vm?.stop();
    this.#set("stopped", "GuestShutdown: stopped by the VMM");
  }

  #stoppedWithin(ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      const onState = (state: MachineState): void => {
        if (state !== "stopped" && state !== "crashed") return;
        clearTimeout(timer);
        this.#events.off("state", onState);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.#events.off("state", onState);
        resolve(false);
      }, ms);
      this.#events.on("state", onState);
    });
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

  async prepareIncoming(incoming: IncomingOptions): Promise<MigrationTarget> {
    if (this.#state !== "created" || this.#vm) throw new MachineUnsupportedError(`the machine is ${this.#state}`);
    const options = nativeBootOptions(this.#spec);
    const vm = this.#attach(this.#vmm.create(incomingVmOptions(options)));
    try {
      return this.#migration.listen(vm, incoming, {
        onRunning: () => {
          this.#bootOptions = options; // a Linux guest's reboot boots the same spec here
          this.#startedAt = Date.now();
          this.#set("running");
        },
        onFailed: (reason) => {
          vm.stop();
          this.#set("crashed", reason);
        },
      });
    } catch (err) {
      vm.stop();
      this.#vm = undefined;
      throw err;
    }
  }

  async migrateTo(target: MigrationTarget, options: MigrationOptions): Promise<MigrationResult> {
    const vm = this.#require("running");
    const result = await this.#migration.migrate(vm, target, options, (p) =>
      this.#events.emit("migration-progress", p),
    );
    if (result.ok && this.#vm === vm) {
      this.#set("stopped", "migrated"); // before stop(): the last console bytes still flow, no guest-exit is seen
      vm.stop();
    }
    return result;
  }

  trustMigrationSource(certificate: string): void {
    this.#migration.trustSource(certificate);
  }

  async cancelMigration(): Promise<void> {
    this.#migration.cancel();
    this.#migration.cancelIncoming();
  }

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

  #onShutdown(vm: VmControl, event: ShutdownEvent): void {
    if (!this.#live() || vm !== this.#vm) return;
    // The Vm already halted its vCPUs; release its memory and threads outside the native callback.
    setImmediate(() => vm.stop());
    if (event.reason === "reset" && this.#bootOptions?.boot && this.#state === "running") {
      // A Linux guest rebooted: boot the same spec on a fresh machine (memory, devices and vCPUs reset).
      this.#reboots++;
      this.#log.info({ reboots: this.#reboots }, "guest reboot");
      this.#boot(this.#bootOptions);
      return;
    }
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
    if ((state === "stopped" && reason !== "migrated") || state === "crashed") {
      // A migration of this guest has nothing left to move: it fails now, with the reason, instead of sending the
      // memory of a guest that is gone (its session keeps the stopped machine until its step in flight returns).
      this.#migration.cancel(`the guest ended during the migration: ${reason ?? state}`);
    }
    this.#state = state;
    this.#events.emit("state", state, reason);
  }
}
