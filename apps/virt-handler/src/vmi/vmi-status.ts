/**
 * The VMI status this node's handler wants, from what its launcher reports (pure; table-tested). The handler owns
 * a VMI's status from `Scheduled` on, while `status.nodeName` is its node:
 *
 * ```
 *  Scheduled --launcher domain Running/Paused--> Running --domain Shutdown---------> Succeeded
 *      |                                            |-----domain Crashed----------> Failed (reason)
 *      |--launcher refused the spec------------------------------------------------> Failed (reason)
 *      `--(launcher vanished while Running)-------------------------------------> Failed (LauncherExited)
 *         (unless a migration was open: then the target's handler may take it over; see source-recovery.ts)
 * ```
 * Conditions while Running: Ready=True; Paused=True (PausedByUser) while paused; LiveMigratable True, or False:
 * InterfaceNotLiveMigratable when the pod network's binding cannot move (bridge without the allow annotation),
 * DisksNotLiveMigratable when a claim is not ReadWriteMany or a hostDisk not shared, or the launcher's reason;
 * SoftwareEmulation when the guest is emulated. Every phase change appends to
 * phaseTransitionTimestamps; the launcher pod is recorded in activePods.
 */
import {
  interfacesMigrationBlocker,
  REASON,
  type VirtualMachineInstance,
  type VirtualMachineInstanceStatus,
  VMI_CONDITION,
  type VmiPhase,
  volumesMigrationBlocker,
} from "@kvt/api";
import type { DomainInfo } from "@kvt/launcher-rpc";
import { type DesiredCondition, setCondition } from "./conditions.ts";

/** What the handler knows about the VMI's launcher on this node. */
export interface LauncherFacts {
  /** The last report of the launcher serving this VMI here (kept after it exits, with `gone`). */
  readonly info?: DomainInfo;
  /** The launcher was seen and its socket has gone away. */
  readonly gone?: boolean;
  /** The launcher registry has scanned this node, so "no launcher" is a fact rather than a guess. */
  readonly registrySynced: boolean;
  /** The launcher refused to build the guest (bad spec, missing image): the reason, for good. */
  readonly syncFailure?: string;
  /**
   * The launcher is missing or gone while a migration was open: the guest may run on the target, whose handler
   * takes the VMI over (migration/source-recovery.ts). The phase is kept meanwhile.
   */
  readonly awaitingTarget?: boolean;
}

/** The node and clock the status is computed for. */
export interface StatusContext {
  readonly nodeName: string;
  /** RFC 3339 time, second resolution (as Kubernetes timestamps). */
  readonly now: string;
}

/** Reason of a VMI that failed because its launcher process went away. */
export const LAUNCHER_EXITED = "LauncherExited";
/** Reason of a VMI whose guest could not be built from its spec. */
export const SYNC_FAILED = "SyncFailed";

const FINAL: ReadonlySet<string> = new Set(["Succeeded", "Failed"]);
const OWNED: ReadonlySet<string> = new Set(["Scheduled", "Running"]);

/** True when this node's handler owns the VMI's status (source side). */
export function ownsVmi(vmi: VirtualMachineInstance, nodeName: string): boolean {
  return vmi.status?.nodeName === nodeName && OWNED.has(vmi.status.phase ?? "");
}

/** The status the handler wants for `vmi`; returns the current status unchanged when it does not own it. */
export function computeVmiStatus(
  vmi: VirtualMachineInstance,
  facts: LauncherFacts,
  ctx: StatusContext,
): VirtualMachineInstanceStatus {
  const status: VirtualMachineInstanceStatus = structuredClone(vmi.status ?? {});
  // Not ours, or ours only until the migration target's handler takes it over: nothing here to report.
  if (!ownsVmi(vmi, ctx.nodeName) || facts.awaitingTarget) return status;
  const { phase, reason } = nextPhase(status.phase ?? "", facts);
  if (phase !== status.phase) {
    status.phase = phase;
    status.phaseTransitionTimestamps = [
      ...(status.phaseTransitionTimestamps ?? []),
      { phase, phaseTransitionTimestamp: ctx.now },
    ];
  }
  if (reason) status.reason = reason;
  status.conditions = conditionsFor(status, facts.info, ctx.now, migrationBlocker(vmi));
  if (facts.syncFailure) {
    // KubeVirt reports a failed sync on the Synchronized condition, with the launcher's message.
    status.conditions = setCondition(
      status.conditions,
      VMI_CONDITION.Synchronized,
      { type: VMI_CONDITION.Synchronized, status: "False", reason: SYNC_FAILED, message: facts.syncFailure },
      ctx.now,
    );
  }
  const podUid = facts.info?.pod.uid;
  if (podUid && !facts.gone && status.activePods?.[podUid] !== ctx.nodeName && !FINAL.has(phase)) {
    status.activePods = { ...status.activePods, [podUid]: ctx.nodeName };
  }
  // The guest's interfaces as its launcher wired them (KubeVirt's netstat: pod IP and MAC, infoSource "domain").
  const interfaces = facts.info?.interfaces;
  if (interfaces && !facts.gone && !FINAL.has(phase)) {
    status.interfaces = interfaces.map((i) => ({
      name: i.name,
      mac: i.mac,
      ...(i.ipAddress ? { ipAddress: i.ipAddress, ipAddresses: [...(i.ipAddresses ?? [i.ipAddress])] } : {}),
      ...(i.podInterfaceName ? { podInterfaceName: i.podInterfaceName } : {}),
      infoSource: i.infoSource,
      ...(i.queueCount ? { queueCount: i.queueCount } : {}),
    }));
  }
  return status;
}

/** Phase transition table (pure). */
export function nextPhase(current: string, facts: LauncherFacts): { phase: VmiPhase; reason?: string } {
  const phase = current as VmiPhase;
  if (FINAL.has(current)) return { phase };
  if (facts.syncFailure) return { phase: "Failed", reason: SYNC_FAILED };
  if (facts.awaitingTarget) return { phase };
  const state = facts.info?.state;
  if (state === "Running" || state === "Paused") {
    return facts.gone ? { phase: "Failed", reason: LAUNCHER_EXITED } : { phase: "Running" };
  }
  if (state === "Shutdown") return { phase: "Succeeded" };
  if (state === "Crashed") return { phase: "Failed", reason: facts.info?.reason ?? "Crashed" };
  if (state === "Migrated") return { phase };
  if (facts.gone || (facts.registrySynced && !facts.info && current === "Running")) {
    return { phase: "Failed", reason: LAUNCHER_EXITED };
  }
  return { phase };
}

/** What the spec says against a live migration: KubeVirt's interface check first, then the volumes'. */
function migrationBlocker(vmi: VirtualMachineInstance): { reason: string; message: string } | undefined {
  const iface = interfacesMigrationBlocker(vmi);
  if (iface) return { reason: REASON.InterfaceNotLiveMigratable, message: iface };
  const volumes = volumesMigrationBlocker(vmi);
  return volumes ? { reason: REASON.DisksNotLiveMigratable, message: volumes } : undefined;
}

function conditionsFor(
  status: VirtualMachineInstanceStatus,
  info: DomainInfo | undefined,
  now: string,
  specBlocker: { reason: string; message: string } | undefined,
): NonNullable<VirtualMachineInstanceStatus["conditions"]> {
  let conditions = [...(status.conditions ?? [])];
  const set = (type: string, want: DesiredCondition | undefined): void => {
    conditions = setCondition(conditions, type, want, now);
  };
  const running = status.phase === "Running" && (info?.state === "Running" || info?.state === "Paused");
  if (running) {
    set(VMI_CONDITION.Ready, { type: VMI_CONDITION.Ready, status: "True" });
  } else if (status.phase !== "Scheduled") {
    set(VMI_CONDITION.Ready, { type: VMI_CONDITION.Ready, status: "False", reason: REASON.GuestNotRunning });
  }
  const paused = running && info?.state === "Paused";
  set(
    VMI_CONDITION.Paused,
    paused
      ? { type: VMI_CONDITION.Paused, status: "True", reason: REASON.PausedByUser, message: "VMI was paused by user" }
      : undefined,
  );
  if (running) {
    // The spec first (KubeVirt's interface and volume checks), then what the backend says of the guest.
    const reason = info?.notMigratableReason;
    set(
      VMI_CONDITION.LiveMigratable,
      specBlocker
        ? { type: VMI_CONDITION.LiveMigratable, status: "False", ...specBlocker }
        : reason
          ? { type: VMI_CONDITION.LiveMigratable, status: "False", reason: "NotMigratable", message: reason }
          : { type: VMI_CONDITION.LiveMigratable, status: "True" },
    );
  }
  if (info?.emulated) {
    set(VMI_CONDITION.SoftwareEmulation, {
      type: VMI_CONDITION.SoftwareEmulation,
      status: "True",
      reason: "SoftwareEmulation",
      message: info.backendReason ?? "the guest runs under software emulation",
    });
  }
  return conditions;
}
