/**
 * The software-emulation backend: one qemu-system-x86_64 process in TCG mode per guest, driven over QMP.
 *
 *   created --start(): spawn -S, QMP, cont--> running <--stop/cont--> paused
 *   created --prepareIncoming(): spawn -incoming defer, migrate-incoming unix, TCP relay--> (RESUME) running
 *   running --shutdown(grace): system_powerdown + Ctrl-Alt-Del; SIGKILL after grace--> stopped
 *   running --migrateTo() completed: quit--> stopped ("migrated")
 *   any --QEMU exits: guest shut down -> stopped; kill() -> crashed ("killed"); otherwise crashed (stderr tail)
 *
 * The serial console is QEMU's stdio: stdout chunks become console events and scrollback, writeConsole goes to stdin.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { EventEmitter } from "node:events";
import { accessSync, chmodSync, constants, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "@kvt/observability";
import { ensureHostTools, type HostTool } from "@kvt/runtime";
import { copiedOnMigration } from "../../vmi/disks.ts";
import type {
  IncomingOptions,
  Machine,
  MachineEvents,
  MachineSpec,
  MachineState,
  MachineStats,
  MigrationOptions,
  MigrationResult,
  MigrationTarget,
  StartOptions,
} from "../machine.ts";
import { ConsoleScrollback } from "./console-buffer.ts";
import { IncomingRelay, newMigrationSecret } from "./migration-relay.ts";
import { residentBytes, threadCpuSeconds } from "./proc-stats.ts";
import { type QemuAccel, type QemuMachineType, qemuArgs } from "./qemu-args.ts";
import { migrateOut } from "./qemu-migration.ts";
import { QmpClient } from "./qmp.ts";

/** What the QEMU backend needs on the host (the NoCloud seed is written in process: seed.ts). */
export const QEMU_TOOLS: readonly HostTool[] = [{ bin: "qemu-system-x86_64", pkg: "qemu-system-x86" }];

/** Construction options of {@link QemuMachine}. */
export interface QemuMachineOptions {
  readonly logger: Logger;
  /** Default `pc` (see qemu-args.ts for the measurement). */
  readonly machineType?: QemuMachineType;
  /** Default `qemu-system-x86_64` from PATH. */
  readonly qemuBinary?: string;
  /** Address the incoming-migration relay listens on and hands to the source; default 127.0.0.1. */
  readonly migrationHost?: string;
  /** The port it listens on (default any free one; KubeVirt's migration port on a pod network). */
  readonly migrationPort?: number;
  /** Console scrollback size in bytes; default 256 KiB. */
  readonly scrollbackBytes?: number;
  /** Default `tcg`; `kvm` only where the host's KVM runs the guest (the benches comparing QEMU with our VMM). */
  readonly accel?: QemuAccel;
}

type Intent = { readonly state: "stopped" | "crashed"; readonly reason: string };

/** A guest run by QEMU in TCG mode. */
export class QemuMachine implements Machine {
  readonly backend = "qemu" as const;
  readonly #spec: MachineSpec;
  readonly #opts: QemuMachineOptions;
  readonly #log: Logger;
  readonly #events = new EventEmitter();
  readonly #scrollback: ConsoleScrollback;
  #state: MachineState = "created";
  #child?: ChildProcess;
  #qmp?: QmpClient;
  #exited?: Promise<void>;
  #intent?: Intent;
  #guestShutdown = false;
  #stderrTail = "";
  #relay?: IncomingRelay;
  #migrating = false;
  /** Console input written while an incoming migration has not finished: held until the guest runs here. */
  #heldInput: Uint8Array[] = [];
  #cancelReason?: string;

  constructor(spec: MachineSpec, options: QemuMachineOptions) {
    this.#spec = spec;
    this.#opts = options;
    this.#log = options.logger.child({ vmi: spec.vmiKey, backend: "qemu" });
    this.#scrollback = new ConsoleScrollback(options.scrollbackBytes);
  }

  get state(): MachineState {
    return this.#state;
  }

  async start(options: StartOptions = {}): Promise<void> {
    this.#expectState("start", ["created"]);
    await this.#launch(false);
    // QEMU was spawned with -S: a paused start just leaves it stopped; resume() sends the first `cont`.
    if (options.paused) {
      this.#setState("paused");
      return;
    }
    await this.#qmpOrThrow().execute("cont");
    this.#setState("running");
  }

  async pause(): Promise<void> {
    this.#expectState("pause", ["running", "paused"]);
    await this.#qmpOrThrow().execute("stop");
    this.#setState("paused");
  }

  async resume(): Promise<void> {
    this.#expectState("resume", ["running", "paused"]);
    await this.#qmpOrThrow().execute("cont");
    this.#setState("running");
  }

  async shutdown(gracePeriodMs: number): Promise<void> {
    if (!this.#alive()) return;
    const qmp = this.#qmpOrThrow();
    if (this.#state === "paused") await qmp.execute("cont");
    // ACPI power button for guests that handle it; Ctrl-Alt-Del (i8042) for the demo image's init, as Firecracker.
    await qmp
      .execute("system_powerdown")
      .catch((err: Error) => this.#log.debug({ err: err.message }, "system_powerdown"));
    if (this.#opts.machineType !== "microvm") {
      const keys = ["ctrl", "alt", "delete"].map((k) => ({ type: "qcode", data: k }));
      await qmp.execute("send-key", { keys }).catch((err: Error) => this.#log.debug({ err: err.message }, "send-key"));
    }
    const exited = this.#exited ?? Promise.resolve();
    let timer: NodeJS.Timeout | undefined;
    const graceOver = new Promise<boolean>((r) => {
      timer = setTimeout(() => r(false), Math.max(0, gracePeriodMs));
    });
    const inTime = await Promise.race([exited.then(() => true), graceOver]);
    clearTimeout(timer);
    if (!inTime) {
      this.#log.warn({ gracePeriodMs }, "guest did not power off within the grace period; killing it");
      await this.#terminate({ state: "stopped", reason: `killed after the ${gracePeriodMs} ms grace period` });
    }
  }

  async kill(): Promise<void> {
    await this.#terminate({ state: "crashed", reason: "killed" });
  }

  async softReboot(): Promise<void> {
    this.#expectState("softReboot", ["running"]);
    await this.#qmpOrThrow().execute("system_reset");
  }

  writeConsole(data: Uint8Array): void {
    // A migration target's serial port is overwritten by the source's device state when the move completes: input
    // written before that is lost (a console user's first keystrokes; seen as a command missing its first letter).
    if (this.#state === "created") {
      this.#heldInput.push(Uint8Array.from(data));
      return;
    }
    const stdin = this.#child?.stdin;
    if (stdin && !stdin.destroyed) stdin.write(data);
  }

  consoleScrollback(): Uint8Array {
    return this.#scrollback.snapshot();
  }

  async stats(): Promise<MachineStats> {
    const base = { state: this.#state, memoryBytes: this.#spec.memoryBytes };
    const pid = this.#child?.pid;
    if (!this.#alive() || !this.#qmp || pid === undefined) return { ...base, vcpuSeconds: [] };
    const cpus = await this.#qmp.execute<{ "cpu-index": number; "thread-id": number }[]>("query-cpus-fast");
    const vcpuSeconds: number[] = [];
    for (const c of cpus) vcpuSeconds[c["cpu-index"]] = threadCpuSeconds(pid, c["thread-id"]);
    return { ...base, vcpuSeconds, residentBytes: residentBytes(pid) };
  }

  async prepareIncoming(incoming: IncomingOptions): Promise<MigrationTarget> {
    this.#expectState("prepareIncoming", ["created"]);
    await this.#launch(true);
    const qmp = this.#qmpOrThrow();
    const sock = join(this.#spec.workDir, "migrate-in.sock");
    rmSync(sock, { force: true });
    await qmp.execute("migrate-set-capabilities", { capabilities: [{ capability: "events", state: true }] });
    await qmp.execute("migrate-incoming", { uri: `unix:${sock}` });
    const secret = newMigrationSecret();
    const host = this.#opts.migrationHost ?? "127.0.0.1";
    this.#relay = await IncomingRelay.listen(host, secret, sock, this.#log, {
      port: this.#opts.migrationPort,
      tls: incoming.tls,
    });
    this.#log.info({ host, port: this.#relay.port }, "waiting for the incoming migration");
    const certificate = incoming.tls ? { certificate: incoming.tls.certificate } : {};
    return { host, port: this.#relay.port, secret, ...certificate };
  }

  trustMigrationSource(certificate: string): void {
    if (!this.#relay) throw new Error("no incoming migration is prepared");
    this.#relay.trustSource(certificate);
  }

  async migrateTo(target: MigrationTarget, options: MigrationOptions): Promise<MigrationResult> {
    this.#expectState("migrateTo", ["running", "paused"]);
    if (this.#migrating) throw new Error("a migration is already in progress");
    this.#migrating = true;
    this.#cancelReason = undefined;
    try {
      const result = await migrateOut(
        {
          qmp: this.#qmpOrThrow(),
          workDir: this.#spec.workDir,
          log: this.#log,
          progress: (p) => this.#events.emit("migration-progress", p),
          cancelReason: () => this.#cancelReason,
          // Local writable disks (emptyDisk, containerDisk overlay) go in the stream: QEMU's block migration.
          copyLocalDisks: (this.#spec.disks ?? []).some(copiedOnMigration),
        },
        target,
        options,
      );
      if (result.ok) {
        this.#log.info(
          { downtimeMs: result.downtimeMs, totalSeconds: result.totalSeconds },
          "migration completed; source exits",
        );
        this.#intent = { state: "stopped", reason: "migrated" };
        await this.#qmp?.execute("quit").catch(() => undefined);
        await this.#exited;
      } else {
        this.#log.warn({ reason: result.failureReason }, "migration failed; guest stays here");
        await this.#resumeAfterFailedMigration();
      }
      return result;
    } finally {
      this.#migrating = false;
    }
  }

  async cancelMigration(): Promise<void> {
    if (!this.#migrating || !this.#qmp) return;
    this.#cancelReason = "canceled";
    await this.#qmp.execute("migrate_cancel");
  }

  on<E extends keyof MachineEvents>(event: E, listener: MachineEvents[E]): void {
    this.#events.on(event, listener);
  }

  off<E extends keyof MachineEvents>(event: E, listener: MachineEvents[E]): void {
    this.#events.off(event, listener);
  }

  async #launch(incoming: boolean): Promise<void> {
    await ensureHostTools(QEMU_TOOLS, (line) => this.#log.info(line));
    const { workDir } = this.#spec;
    mkdirSync(workDir, { recursive: true, mode: 0o700 });
    const qmpSocket = join(workDir, "qmp.sock");
    if (Buffer.byteLength(qmpSocket) > 100)
      throw new Error(`work directory path too long for a unix socket: ${workDir}`);
    rmSync(qmpSocket, { force: true });
    const accel = this.#opts.accel ?? "tcg";
    const machineType = this.#opts.machineType ?? "pc";
    const args = qemuArgs(this.#spec, { qmpSocket }, { machineType, incoming, accel, vhostNet: vhostNetOpens() });
    const binary = this.#opts.qemuBinary ?? "qemu-system-x86_64";
    this.#log.info({ binary, args }, `starting QEMU (${accel.toUpperCase()})`);
    const child = spawn(binary, args, { stdio: ["pipe", "pipe", "pipe"] });
    this.#child = child;
    child.stdout.on("data", (chunk: Buffer) => {
      const bytes = new Uint8Array(chunk);
      this.#scrollback.push(bytes);
      this.#events.emit("console", bytes);
    });
    child.stderr.on("data", (chunk: Buffer) => {
      this.#stderrTail = (this.#stderrTail + chunk.toString("utf8")).slice(-2000);
    });
    child.stdin.on("error", () => undefined);
    // If the launcher process exits (crash, uncaught error), its QEMU must not outlive it.
    const reap = (): void => void child.kill("SIGKILL");
    process.once("exit", reap);
    this.#exited = new Promise((resolve) => {
      child.once("close", (code, signal) => {
        process.off("exit", reap);
        this.#onExit(code, signal);
        resolve();
      });
    });
    child.once("error", (err) => this.#log.error({ err }, "QEMU process error"));
    try {
      this.#qmp = await QmpClient.connect(qmpSocket, this.#log);
      // QEMU made the monitor socket with its umask; only this launcher's user may reach the guest's monitor.
      chmodSync(qmpSocket, 0o600);
    } catch (err) {
      child.kill("SIGKILL");
      await this.#exited;
      throw new Error(`QEMU did not start: ${(err as Error).message}; ${this.#stderrTail.trim()}`, { cause: err });
    }
    this.#qmp.on("event", (e) => {
      if (e.event === "SHUTDOWN" && e.data.guest === true) this.#guestShutdown = true;
      else if (e.event === "RESUME" && (this.#state === "paused" || this.#state === "created") && incoming)
        this.#setState("running");
      else if (e.event === "RESUME" && this.#state === "paused") this.#setState("running");
      else if (e.event === "STOP" && this.#state === "running" && !this.#migrating) this.#setState("paused");
    });
  }

  #onExit(code: number | null, signal: NodeJS.Signals | null): void {
    this.#qmp?.close();
    this.#relay?.close();
    const intent = this.#intent;
    if (intent) this.#setState(intent.state, intent.reason);
    else if (this.#guestShutdown && code === 0) this.#setState("stopped", "guest powered off");
    else {
      const how = signal ? `signal ${signal}` : `exit code ${code}`;
      this.#setState("crashed", `QEMU ended with ${how}: ${this.#stderrTail.trim().split("\n").slice(-3).join(" | ")}`);
    }
  }

  async #terminate(intent: Intent): Promise<void> {
    if (!this.#alive() || !this.#child) return;
    this.#intent = intent;
    this.#child.kill("SIGKILL");
    await this.#exited;
  }

  async #resumeAfterFailedMigration(): Promise<void> {
    if (!this.#qmp || this.#state !== "running") return;
    const status = await this.#qmp.execute<{ status: string }>("query-status").catch(() => undefined);
    if (status && status.status !== "running") await this.#qmp.execute("cont").catch(() => undefined);
  }

  #alive(): boolean {
    return (
      this.#state === "running" || this.#state === "paused" || (this.#state === "created" && this.#child !== undefined)
    );
  }

  #qmpOrThrow(): QmpClient {
    if (!this.#qmp) throw new Error("QEMU is not running");
    return this.#qmp;
  }

  #expectState(op: string, allowed: readonly MachineState[]): void {
    if (!allowed.includes(this.#state)) throw new Error(`${op}: not allowed while the machine is ${this.#state}`);
  }

  #setState(state: MachineState, reason?: string): void {
    if (this.#state === state) return;
    if (this.#state === "stopped" || this.#state === "crashed") return;
    this.#state = state;
    this.#log.info({ state, reason }, "machine state");
    this.#events.emit("state", state, reason);
    if (state === "running" && this.#heldInput.length > 0) {
      const held = this.#heldInput.splice(0);
      for (const chunk of held) this.writeConsole(chunk);
    }
  }
}

/** Whether this process may open /dev/vhost-net (libvirt's test before it gives a KubeVirt NIC vhost=on). */
function vhostNetOpens(): boolean {
  try {
    accessSync("/dev/vhost-net", constants.R_OK | constants.W_OK);
    return true;
  } catch {
    return false;
  }
}
