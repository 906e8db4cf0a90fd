/**
 * An in-memory Machine for unit tests of the launcher (KubeVirt's fake-qemu-process): follows the Machine
 * lifecycle, echoes console input, and lets a test finish a migration when it chooses. Only tests import it.
 */
import { EventEmitter } from "node:events";
import {
  type IncomingOptions,
  type Machine,
  type MachineEvents,
  type MachineState,
  type MachineStats,
  MachineUnsupportedError,
  type MigrationOptions,
  type MigrationProgress,
  type MigrationResult,
  type MigrationTarget,
  type StartOptions,
} from "../machine/machine.ts";

/** A scripted Machine. */
export class FakeMachine implements Machine {
  readonly backend = "native" as const;
  state: MachineState = "created";
  readonly calls: string[] = [];
  readonly consoleInput: string[] = [];
  lastMigrationOptions: MigrationOptions | undefined;
  readonly #events = new EventEmitter();
  #output = "";
  #migration: { resolve: (r: MigrationResult) => void } | undefined;

  async start(options: StartOptions = {}): Promise<void> {
    if (options.paused) {
      this.calls.push("start paused");
      this.#set("paused");
      return;
    }
    this.calls.push("start");
    this.#set("running");
    this.emitConsole("booted\n");
  }
  async pause(): Promise<void> {
    this.#set("paused");
  }
  async resume(): Promise<void> {
    this.#set("running");
  }
  async shutdown(gracePeriodMs: number): Promise<void> {
    this.calls.push(`shutdown ${gracePeriodMs}`);
    this.#set("stopped", "GuestShutdown");
  }
  async kill(): Promise<void> {
    this.#set("crashed", "Killed");
  }
  async softReboot(): Promise<void> {
    this.calls.push("softReboot");
  }
  writeConsole(data: Uint8Array): void {
    const text = new TextDecoder().decode(data);
    this.consoleInput.push(text);
    this.emitConsole(text);
  }
  consoleScrollback(): Uint8Array {
    return new TextEncoder().encode(this.#output);
  }
  async stats(): Promise<MachineStats> {
    return { state: this.state, vcpuSeconds: [1.5], memoryBytes: 64 << 20 };
  }
  /** How long prepareIncoming takes (a real one sets up its listener). */
  incomingDelayMs = 0;

  /** The options of the last prepareIncoming, and the source certificates pinned since. */
  lastIncoming?: IncomingOptions;
  trustedSources: string[] = [];

  async prepareIncoming(options: IncomingOptions): Promise<MigrationTarget> {
    this.calls.push("prepareIncoming");
    this.lastIncoming = options;
    if (this.incomingDelayMs > 0) await new Promise((r) => setTimeout(r, this.incomingDelayMs));
    const certificate = options.tls ? { certificate: options.tls.certificate } : {};
    return { host: "127.0.0.1", port: 45_000, secret: "one-time", ...certificate };
  }
  trustMigrationSource(certificate: string): void {
    if (!this.calls.includes("prepareIncoming")) throw new MachineUnsupportedError("no incoming migration is prepared");
    this.trustedSources.push(certificate);
  }
  migrateTo(_target: MigrationTarget, options: MigrationOptions): Promise<MigrationResult> {
    this.lastMigrationOptions = options;
    return new Promise((resolve) => {
      this.#migration = { resolve };
    });
  }
  async cancelMigration(): Promise<void> {
    this.finishMigration({ ok: false, failureReason: "canceled", totalSeconds: 1, bytesSent: 0, iterations: 0 });
  }
  on<E extends keyof MachineEvents>(event: E, listener: MachineEvents[E]): void {
    this.#events.on(event, listener);
  }
  off<E extends keyof MachineEvents>(event: E, listener: MachineEvents[E]): void {
    this.#events.off(event, listener);
  }

  /** Test control: the guest prints `text`. */
  emitConsole(text: string): void {
    this.#output += text;
    this.#events.emit("console", new TextEncoder().encode(text));
  }
  /** Test control: a progress sample of the running migration. */
  emitProgress(progress: MigrationProgress): void {
    this.#events.emit("migration-progress", progress);
  }
  /** Test control: end the running migration with `result` (the source releases the guest on success). */
  finishMigration(result: MigrationResult): void {
    this.#migration?.resolve(result);
    this.#migration = undefined;
  }
  /** Test control: an incoming migration completed, or the guest changed state by itself. */
  setState(state: MachineState, reason?: string): void {
    this.#set(state, reason);
  }

  #set(state: MachineState, reason?: string): void {
    this.state = state;
    this.#events.emit("state", state, reason);
  }
}
