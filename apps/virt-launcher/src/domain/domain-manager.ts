/**
 * The launcher's one guest, as launcher-rpc commands see it: a {@link LauncherService} over a {@link Machine}.
 * It builds the machine on the first sync (or prepare-target), maps machine states to domain states, publishes
 * every change on the event stream, runs the source side of a migration in the background, and settles
 * {@link DomainManager.finished} once the guest is gone for good, so main() can exit with the right code.
 *
 * ```
 *  NoDomain --sync: build+start--> Running <--pause/unpause--> Paused
 *     |                              |--machine stopped------------> Shutdown   exit 0
 *     |                              |--machine crashed / kill-----> Crashed    exit 1
 *     |                              `--migration out ok-----------> Migrated   exit 0
 *     `--prepare-target--> IncomingMigration --machine running--> Running (target)
 * ```
 */
import { acceptableCompletionTimeSeconds, type VirtualMachineInstance } from "@kvt/api";
import {
  type DomainInfo,
  type DomainInterface,
  type DomainState,
  type DomainStats,
  type DomainTransition,
  type JsonObject,
  type LauncherEventBody,
  LauncherRpcError,
  type LauncherService,
  type MigrateRequest,
  type MigrationInfo,
  type MigrationTarget,
  type PrepareTargetRequest,
  type ShutdownRequest,
  type SourceCertificateRequest,
  type SyncRequest,
} from "@kvt/launcher-rpc";
import type { Logger } from "@kvt/observability";
import {
  type Machine,
  type MachineSpec,
  type MachineState,
  MachineUnsupportedError,
  type MigrationOptions,
} from "../machine/machine.ts";
import type { GuestNetwork } from "../network/port-forward.ts";
import { localDisksBlocker } from "../vmi/disks.ts";
import type { SpecRole } from "../vmi/machine-spec.ts";
import type { ConsoleHub } from "./console-hub.ts";
import { SourceMigrationTrace, TargetMigrationTrace } from "./migration-trace.ts";

/** A built machine and how it was chosen (for the SoftwareEmulation condition). */
export interface BuiltMachine {
  readonly machine: Machine;
  readonly emulated: boolean;
  readonly reason: string;
  /** The guest's wired interfaces (status.interfaces), when it has any. */
  readonly interfaces?: readonly DomainInterface[];
  /** Where port-forwards reach the guest, when it has a wired pod-network interface. */
  readonly guestNetwork?: GuestNetwork;
}

/** What the manager needs from the launcher's composition root. */
export interface DomainDeps {
  readonly identity: { namespace: string; name: string; uid: string; podName?: string; podUid?: string };
  /** The VMI given at start-up, if any (else the first sync/prepare-target must carry one). */
  readonly vmi?: VirtualMachineInstance;
  /** VMI -> MachineSpec (throws SpecError on a bad spec). */
  /** The machine spec of `vmi`, its disk files made ready (a containerDisk image is imported: may take a while). */
  readonly toSpec: (vmi: VirtualMachineInstance, role: SpecRole) => MachineSpec | Promise<MachineSpec>;
  /** Picks the backend and creates the machine (not yet started). */
  readonly createMachine: (spec: MachineSpec) => Promise<BuiltMachine>;
  readonly console: ConsoleHub;
  readonly publish: (event: LauncherEventBody) => void;
  readonly logger: Logger;
}

/** How the guest ended: Shutdown and Migrated are success, Crashed is failure. */
export interface DomainOutcome {
  readonly state: "Shutdown" | "Crashed" | "Migrated";
  readonly reason?: string;
}

const FINAL: ReadonlySet<DomainState> = new Set(["Shutdown", "Crashed", "Migrated"]);

/** Implements the launcher's command API over one machine. */
export class DomainManager implements LauncherService {
  readonly #deps: DomainDeps;
  #vmi: VirtualMachineInstance | undefined;
  #built: BuiltMachine | undefined;
  /** Why the guest's disks keep it here (a writable disk that is not shared), if they do. */
  #disksBlocker: string | undefined;
  #building: Promise<BuiltMachine> | undefined;
  #state: DomainState = "NoDomain";
  #reason: string | undefined;
  #startedAt: string | undefined;
  #migration: MigrationInfo | undefined;
  /** The machine's stop reason while this source migrated out (applied once the migration failed). */
  #stoppedWhileMigrating: string | undefined;
  /** The prepared incoming migration and its answer (listener and one-time secret), for a repeated prepare. */
  #prepared: { readonly migrationUid: string; readonly target: MigrationTarget } | undefined;
  /** The prepare in flight (or done), so a repeated request for the same migration shares it. */
  #preparing: { readonly migrationUid: string; readonly target: Promise<MigrationTarget> } | undefined;
  /** Spans of the incoming migration (target side), until the guest runs here. */
  #incomingTrace: TargetMigrationTrace | undefined;
  #memoryBytes = 0;
  readonly #finished: Promise<DomainOutcome>;
  #settle!: (outcome: DomainOutcome) => void;

  constructor(deps: DomainDeps) {
    this.#deps = deps;
    this.#vmi = deps.vmi;
    this.#finished = new Promise((resolve) => {
      this.#settle = resolve;
    });
  }

  /** Settles once the guest reached Shutdown, Crashed or Migrated. */
  get finished(): Promise<DomainOutcome> {
    return this.#finished;
  }

  /** The current domain state. */
  get state(): DomainState {
    return this.#state;
  }

  /** Where port-forwards reach the guest: only while it runs here (not before boot, not once it left or ended). */
  get guestNetwork(): GuestNetwork | undefined {
    return this.#state === "Running" || this.#state === "Paused" ? this.#built?.guestNetwork : undefined;
  }

  info(): DomainInfo {
    const { namespace, name, uid, podName, podUid } = this.#deps.identity;
    return {
      protocolVersion: "v1",
      vmi: { namespace, name, uid },
      pod: { ...(podName ? { name: podName } : {}), ...(podUid ? { uid: podUid } : {}) },
      pid: process.pid,
      state: this.#state,
      ...(this.#reason ? { reason: this.#reason } : {}),
      ...(this.#built
        ? { backend: this.#built.machine.backend, emulated: this.#built.emulated, backendReason: this.#built.reason }
        : {}),
      ...(this.#startedAt ? { startedAt: this.#startedAt } : {}),
      ...(this.#built && (this.#built.machine.notMigratableReason ?? this.#disksBlocker)
        ? { notMigratableReason: this.#built.machine.notMigratableReason ?? this.#disksBlocker }
        : {}),
      ...(this.#migration ? { migration: this.#migration } : {}),
      ...(this.#built?.interfaces ? { interfaces: this.#built.interfaces } : {}),
    };
  }

  async sync(request: SyncRequest): Promise<DomainInfo> {
    if (this.#state !== "NoDomain") return this.info(); // idempotent: the handler re-syncs freely
    const built = await this.#build(request.vmi, "source");
    if (this.#state === "NoDomain") {
      try {
        await built.machine.start({ paused: this.#vmi?.spec?.startStrategy === "Paused" });
      } catch (error) {
        // A guest that cannot start will not start on a retry either: report it, so the VMI fails with the reason.
        this.#transition(
          "Crashed",
          "crashed",
          `start failed: ${error instanceof Error ? error.message : String(error)}`,
        );
        return this.info();
      }
      this.#startedAt = new Date().toISOString();
      this.#transition("Running", "started");
      // startStrategy Paused: the machine came up paused; the domain says so until the first unpause.
      if (built.machine.state === "paused") this.#transition("Paused", "paused");
    }
    return this.info();
  }

  async pause(): Promise<void> {
    const machine = this.#require("Running", "pause");
    await asConflict(machine.pause());
  }

  async unpause(): Promise<void> {
    const machine = this.#require("Paused", "unpause");
    await asConflict(machine.resume());
  }

  async softReboot(): Promise<void> {
    const machine = this.#require("Running", "soft-reboot");
    await asConflict(machine.softReboot());
  }

  async shutdown(request: ShutdownRequest): Promise<void> {
    if (FINAL.has(this.#state)) return;
    if (this.#built) await this.#built.machine.shutdown(request.gracePeriodSeconds * 1000);
    else this.#transition("Shutdown", "shutdown", "shut down before the guest was started");
  }

  async kill(): Promise<void> {
    if (FINAL.has(this.#state)) return;
    if (this.#built) await this.#built.machine.kill();
    if (!FINAL.has(this.#state)) this.#transition("Crashed", "crashed", "Killed");
  }

  prepareTarget(request: PrepareTargetRequest): Promise<MigrationTarget> {
    // A handler that restarted while its prepare was under way asks again: that same preparation answers both. (A
    // second one would build another machine beside the first; the handler waited 30 s for it.)
    if (this.#preparing?.migrationUid === request.migrationUid) return this.#preparing.target;
    const target = this.#prepareTarget(request);
    this.#preparing = { migrationUid: request.migrationUid, target };
    target.catch(() => {
      if (this.#preparing?.target === target) this.#preparing = undefined; // a later request may try again
    });
    return target;
  }

  async #prepareTarget(request: PrepareTargetRequest): Promise<MigrationTarget> {
    if (this.#preparing && !this.#prepared) {
      throw new LauncherRpcError("Conflict", `already preparing migration ${this.#preparing.migrationUid}`);
    }
    if (this.#state !== "NoDomain" && this.#state !== "IncomingMigration") {
      throw new LauncherRpcError("Conflict", `cannot receive a migration with a ${this.#state} domain`);
    }
    if (this.#prepared) {
      // A handler that restarted before it published the answer asks again: the same listener, the same secret.
      if (this.#prepared.migrationUid === request.migrationUid) return this.#prepared.target;
      throw new LauncherRpcError("Conflict", `already receiving migration ${this.#prepared.migrationUid}`);
    }
    const built = await this.#build(request.vmi, "target");
    this.#migration = { migrationUid: request.migrationUid, role: "target", phase: "Preparing" };
    this.#incomingTrace = new TargetMigrationTrace(request.migrationUid);
    this.#state = "IncomingMigration";
    const tls = request.disableTLS === true ? false : request.tls;
    if (tls === undefined) {
      throw new LauncherRpcError("BadRequest", "prepare-target needs this launcher's TLS identity unless disableTLS");
    }
    const target = await asConflict(built.machine.prepareIncoming({ tls }));
    this.#prepared = { migrationUid: request.migrationUid, target };
    this.#migration = {
      ...this.#migration,
      phase: "Ready",
      startTime: new Date().toISOString(),
      targetAddress: { host: target.host, port: target.port },
    };
    this.#publishDomain("incoming-ready");
    return target;
  }

  async migrate(request: MigrateRequest): Promise<void> {
    const machine = this.#require("Running", "migrate");
    if (this.#migration?.role === "source" && this.#migration.phase === "Running") {
      if (this.#migration.migrationUid === request.migrationUid) return; // retried request: already under way
      throw new LauncherRpcError("Conflict", `migration ${this.#migration.migrationUid} is already running`);
    }
    const uid = request.migrationUid;
    const options = toMachineOptions(request, this.#vmi ?? NO_VMI, this.#memoryBytes);
    this.#migration = { migrationUid: uid, role: "source", phase: "Running", startTime: new Date().toISOString() };
    this.#stoppedWhileMigrating = undefined;
    const spans = new SourceMigrationTrace(uid, request.target.host);
    const onProgress = (progress: MigrationInfo["progress"] & object): void => {
      spans.progress(progress);
      if (this.#migration?.migrationUid === uid) this.#migration = { ...this.#migration, progress };
      this.#deps.publish({ type: "migration-progress", migrationUid: uid, progress });
    };
    machine.on("migration-progress", onProgress);
    this.#deps.logger.info({ migrationUid: uid, target: request.target.host }, "migration started");
    machine
      .migrateTo(request.target, options)
      .catch((error: unknown) => ({
        ok: false,
        failureReason: error instanceof Error ? error.message : String(error),
        totalSeconds: 0,
        bytesSent: 0,
        iterations: 0,
      }))
      .then((result) => {
        machine.off("migration-progress", onProgress);
        spans.end(result);
        const endTime = new Date().toISOString();
        this.#migration = { ...this.#migration!, phase: result.ok ? "Succeeded" : "Failed", result, endTime };
        this.#deps.logger.info({ migrationUid: uid, ...result }, "migration ended");
        this.#deps.publish({ type: "migration-result", migrationUid: uid, result });
        const stopped = this.#stoppedWhileMigrating;
        this.#stoppedWhileMigrating = undefined;
        if (result.ok) this.#transition("Migrated", "migrated", "migrated to the target");
        else if (stopped !== undefined) this.#onMachineState("stopped", stopped);
        else this.#publishDomain("snapshot");
      })
      .catch((error: unknown) => this.#deps.logger.error({ err: error }, "migration bookkeeping failed"));
  }

  /** Target side: pins the source's certificate (from the handlers' exchange) for the prepared migration. */
  async sourceCertificate(request: SourceCertificateRequest): Promise<void> {
    const prepared = this.#prepared;
    if (!prepared || prepared.migrationUid !== request.migrationUid || this.#state !== "IncomingMigration") {
      throw new LauncherRpcError("NotFound", `no prepared incoming migration ${request.migrationUid} here`);
    }
    if (!prepared.target.certificate) {
      throw new LauncherRpcError(
        "Conflict",
        `migration ${request.migrationUid} is prepared without TLS (KubeVirt's migrations.disableTLS)`,
      );
    }
    try {
      this.#built!.machine.trustMigrationSource(request.certificate);
    } catch (error) {
      // A certificate OpenSSL cannot read is the caller's fault; a source already connected is a conflict.
      const code = /not a PEM certificate/.test(String((error as Error).message)) ? "BadRequest" : "Conflict";
      throw new LauncherRpcError(code, (error as Error).message, { cause: error });
    }
    this.#deps.logger.info({ migrationUid: request.migrationUid }, "the source's certificate is pinned");
  }

  async cancelMigration(request: { migrationUid: string }): Promise<void> {
    const m = this.#migration;
    if (!m || m.migrationUid !== request.migrationUid || m.role !== "source") {
      throw new LauncherRpcError("NotFound", `no source migration ${request.migrationUid} here`);
    }
    if (m.phase !== "Running") return; // already over: cancelling is a no-op, as in KubeVirt
    await this.#built!.machine.cancelMigration();
  }

  async stats(): Promise<DomainStats> {
    const launcherRssBytes = launcherRss();
    if (!this.#built) return { state: this.#state, vcpuSeconds: [], memoryBytes: 0, launcherRssBytes };
    const s = await this.#built.machine.stats();
    return {
      state: this.#state,
      vcpuSeconds: s.vcpuSeconds,
      memoryBytes: s.memoryBytes,
      ...(s.residentBytes !== undefined ? { residentBytes: s.residentBytes } : {}),
      launcherRssBytes,
    };
  }

  /** Builds the machine once (concurrent callers share the build). */
  async #build(vmiJson: JsonObject | undefined, role: SpecRole): Promise<BuiltMachine> {
    if (this.#built) return this.#built;
    if (!this.#building) {
      const vmi = (vmiJson as VirtualMachineInstance | undefined) ?? this.#vmi;
      if (!vmi) throw new LauncherRpcError("BadRequest", "this launcher was started without a VMI; send one");
      if (vmiJson && vmi.metadata?.uid && vmi.metadata.uid !== this.#deps.identity.uid) {
        throw new LauncherRpcError("BadRequest", `VMI uid ${vmi.metadata.uid} is not this launcher's`);
      }
      this.#vmi = vmi;
      this.#building = this.#create(vmi, role).finally(() => {
        this.#building = undefined;
      });
    }
    return this.#building;
  }

  async #create(vmi: VirtualMachineInstance, role: SpecRole): Promise<BuiltMachine> {
    let spec: MachineSpec;
    try {
      spec = await this.#deps.toSpec(vmi, role);
    } catch (error) {
      throw new LauncherRpcError("BadRequest", (error as Error).message, { cause: error });
    }
    this.#memoryBytes = spec.memoryBytes;
    const built = await this.#deps.createMachine(spec).catch((error: unknown) => {
      if (error instanceof MachineUnsupportedError)
        throw new LauncherRpcError("BadRequest", error.message, { cause: error });
      throw error;
    });
    // Our VMM copies local disks with the memory; QEMU here does not (yet): such a guest stays put there.
    this.#disksBlocker = built.machine.backend === "qemu" ? localDisksBlocker(spec.disks ?? []) : undefined;
    this.#built = built;
    this.#deps.console.attach(built.machine);
    built.machine.on("state", (state, reason) => this.#onMachineState(state, reason));
    this.#deps.logger.info(
      { backend: built.machine.backend, emulated: built.emulated, why: built.reason },
      "machine built",
    );
    return built;
  }

  #onMachineState(state: MachineState, reason: string | undefined): void {
    // While this source migrates out, a backend pausing or stopping the guest is the switch-over, not a user
    // pause or a shutdown: the migration result decides (Migrated on success; the guest runs on after a failure).
    if (this.#migration?.role === "source" && this.#migration.phase === "Running" && state !== "crashed") {
      // A guest that shut down meanwhile: once the migration failed (it cannot succeed), the domain is Shutdown.
      if (state === "stopped") this.#stoppedWhileMigrating = reason ?? "GuestShutdown";
      return;
    }
    const next = nextDomainState(this.#state, state, reason);
    if (!next) return;
    if (next.transition === "incoming-completed") {
      this.#migration = { ...this.#migration!, phase: "Succeeded", endTime: new Date().toISOString() };
      this.#incomingTrace?.completed();
      this.#startedAt = new Date().toISOString();
    }
    this.#transition(next.state, next.transition, next.reason);
  }

  #transition(state: DomainState, transition: DomainTransition, reason?: string): void {
    this.#state = state;
    this.#reason = reason;
    this.#deps.logger.info({ state, reason }, `domain ${transition}`);
    this.#publishDomain(transition);
    if (state === "Shutdown" || state === "Crashed" || state === "Migrated") {
      this.#settle({ state, ...(reason ? { reason } : {}) });
    }
  }

  #publishDomain(transition: DomainTransition): void {
    this.#deps.publish({ type: "domain", transition, info: this.info() });
  }

  #require(state: DomainState, verb: string): Machine {
    if (this.#state !== state || !this.#built) {
      throw new LauncherRpcError("Conflict", `cannot ${verb} a ${this.#state} domain`);
    }
    return this.#built.machine;
  }
}

/** This process's resident memory; 0 where the host cannot say (no /proc, as in a bare initramfs): stats still answer. */
function launcherRss(): number {
  try {
    return process.memoryUsage.rss();
  } catch {
    return 0;
  }
}

/** A VMI that names no memory (the completion timeout then goes by the guest's). */
const NO_VMI = { spec: { domain: { devices: {} } } } as VirtualMachineInstance;

/**
 * RPC options -> machine options. The completion timeout is KubeVirt's formula, owned by @kvt/api (per decimal GB of
 * the VMI's memory, rounded up); the guest's memory stands in when the VMI names none.
 */
function toMachineOptions(request: MigrateRequest, vmi: VirtualMachineInstance, memoryBytes: number): MigrationOptions {
  const o = request.options;
  const perGiB = { completionTimeoutPerGiB: o.completionTimeoutPerGiB };
  return {
    bandwidthBytesPerSec: o.bandwidthBytesPerSec,
    maxDowntimeMs: o.maxDowntimeMs,
    allowAutoConverge: o.allowAutoConverge,
    completionTimeoutSec:
      acceptableCompletionTimeSeconds(vmi, perGiB) ||
      acceptableCompletionTimeSeconds(NO_VMI, perGiB, BigInt(memoryBytes)),
    progressTimeoutSec: o.progressTimeoutSeconds,
    tls: o.disableTLS === true ? false : sourceTls(request),
  };
}

/** The source's TLS identity of a TLS migration (parseMigrate requires it unless disableTLS). */
function sourceTls(request: MigrateRequest): NonNullable<MigrateRequest["tls"]> {
  if (!request.tls)
    throw new LauncherRpcError("BadRequest", "migrate needs this launcher's TLS identity unless disableTLS");
  return request.tls;
}

/** Machine state change -> domain transition (pure); undefined when it changes nothing. */
export function nextDomainState(
  current: DomainState,
  machine: MachineState,
  reason: string | undefined,
): { state: DomainState; transition: DomainTransition; reason?: string } | undefined {
  if (FINAL.has(current)) return undefined;
  if (machine === "running" && current === "IncomingMigration")
    return { state: "Running", transition: "incoming-completed" };
  if (machine === "running" && current === "Paused") return { state: "Running", transition: "resumed" };
  if (machine === "paused" && current === "Running") return { state: "Paused", transition: "paused" };
  if (machine === "stopped") return { state: "Shutdown", transition: "shutdown", reason: reason ?? "GuestShutdown" };
  if (machine === "crashed") return { state: "Crashed", transition: "crashed", reason: reason ?? "crashed" };
  return undefined;
}

/** A request the backend cannot honour is a 409, as in KubeVirt; anything else stays an internal error. */
async function asConflict<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (error) {
    if (error instanceof MachineUnsupportedError)
      throw new LauncherRpcError("Conflict", error.message, { cause: error });
    throw error;
  }
}
