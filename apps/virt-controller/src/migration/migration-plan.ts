/**
 * The VMIM phase machine on the controller side (pure; KubeVirt `watch/migration/migration.go`).
 *
 * ```
 *  "" ─> Pending ─(limits allow; target pod created)─> Scheduling ─(target pod ready)─> Scheduled
 *          │                                             │ unschedulable 5 min / pending 15 min / pod died
 *          │                                             v
 *          │                                           Failed <──────────────────────────────────────┐
 *          v                                                                                         │
 *  Scheduled ─(hand-off: VMI migrationState = target)─> PreparingTarget ─(targetNodeAddress)─> TargetReady
 *  TargetReady ─(startTimestamp)─> Running ─(completed)─> Succeeded        (failed / target gone) ───┘
 * ```
 * Deleting the VMIM cancels it (the finalizer holds it until the migration is final, then is removed): before the hand-off the target pod is deleted and the
 * migration fails; after it, `abortRequested` is set on the VMI and the source handler ends it.
 */
import type {
  Condition,
  MigrationState,
  VirtualMachineInstance,
  VirtualMachineInstanceMigration,
  VirtualMachineInstanceMigrationStatus,
} from "@kvt/api";
import { ANNOTATION, isMigrationFinal, type MigrationPhase, setCondition } from "@kvt/api";
import type { Pod } from "@kvt/kube";
import { livePods, podIsReady } from "../vmi/vmi-status.ts";

/** Default seconds an unschedulable target pod may stay Pending. */
export const UNSCHEDULABLE_TIMEOUT_SECONDS = 300;
/** Default seconds a target pod may stay Pending for any reason. */
export const PENDING_TIMEOUT_SECONDS = 900;
/** Finished VMIMs kept per VMI. */
export const FINISHED_MIGRATIONS_KEPT = 5;

/** Everything the plan looks at. */
export interface MigrationInputs {
  readonly migration: VirtualMachineInstanceMigration;
  readonly vmi: VirtualMachineInstance | undefined;
  /** Pods labelled with this migration's uid. */
  readonly targetPods: readonly Pod[];
  /** Other migrations past Pending and not final, cluster-wide / from the VMI's node. */
  readonly runningInCluster: number;
  readonly outboundFromNode: number;
  readonly limits: { readonly perCluster: number; readonly perNode: number };
  /** The migrationState to hand off (policy already resolved). */
  readonly handoffState: () => MigrationState;
  /** Epoch ms. */
  readonly now: number;
}

/** An I/O step the controller carries out. */
export type MigrationAction =
  | { readonly kind: "createTargetPod" }
  | { readonly kind: "deleteTargetPods" }
  | { readonly kind: "handoff"; readonly state: MigrationState }
  | { readonly kind: "abort" }
  | { readonly kind: "removeFinalizer" };

/** An event to record on the VMIM. */
export interface MigrationEvent {
  readonly type: "Normal" | "Warning";
  readonly reason: string;
  readonly message: string;
}

/** The plan: the status to write, the actions, events and when to look again. */
export interface MigrationPlan {
  readonly status: VirtualMachineInstanceMigrationStatus;
  readonly actions: MigrationAction[];
  readonly events: MigrationEvent[];
  readonly requeueAfterMs?: number;
}

const PRE_HANDOFF: ReadonlySet<string> = new Set(["", "Pending", "Scheduling", "Scheduled"]);

function timeoutSeconds(m: VirtualMachineInstanceMigration, annotation: string, fallback: number): number {
  const v = Number(m.metadata?.annotations?.[annotation]);
  return Number.isFinite(v) && v > 0 ? v : fallback;
}

/** Builds the plan for one reconcile. */
export function planMigration(input: MigrationInputs): MigrationPlan {
  const { migration: m, vmi, now } = input;
  const nowIso = new Date(now).toISOString();
  let status: VirtualMachineInstanceMigrationStatus = { ...m.status };
  const actions: MigrationAction[] = [];
  const events: MigrationEvent[] = [];
  let requeueAfterMs: number | undefined;
  const setPhase = (phase: MigrationPhase): void => {
    if (status.phase === phase) return;
    status = {
      ...status,
      phase,
      phaseTransitionTimestamps: [
        ...(status.phaseTransitionTimestamps ?? []),
        { phase, phaseTransitionTimestamp: nowIso },
      ],
    };
  };
  const fail = (reason: string, message: string): void => {
    setPhase("Failed");
    status.migrationState = {
      ...status.migrationState,
      failed: true,
      failureReason: message,
      endTimestamp: status.migrationState?.endTimestamp ?? nowIso,
    };
    events.push({ type: "Warning", reason, message });
    if (PRE_HANDOFF.has(m.status?.phase ?? "")) actions.push({ kind: "deleteTargetPods" });
  };
  const phase = status.phase ?? "";
  const vmiState =
    vmi?.status?.migrationState?.migrationUid === m.metadata?.uid ? vmi?.status?.migrationState : undefined;
  const target = livePods(input.targetPods).at(-1);

  if (isMigrationFinal(phase)) return finish(status, actions, events, undefined, m);
  if (phase === "") setPhase("Pending");

  if (m.metadata?.deletionTimestamp) {
    if (PRE_HANDOFF.has(phase)) {
      fail("MigrationCanceled", "Migration failed due to being canceled");
    } else if (vmiState && !vmiState.completed && !vmiState.failed) {
      if (!vmiState.abortRequested) actions.push({ kind: "abort" });
      status.conditions = setAbortCondition(status.conditions, nowIso);
    }
  }

  if (!vmi || vmi.status?.phase === "Succeeded" || vmi.status?.phase === "Failed") {
    // A migration the source node recorded as failed keeps its reason (e.g. its launcher was lost mid-migration).
    if (status.phase !== "Failed")
      fail(
        "FailedMigration",
        vmiState?.failed && vmiState.failureReason
          ? `source node reported migration failed: ${vmiState.failureReason}`
          : vmi
            ? "Migration failed because the VMI shut down"
            : "Migration failed because the VMI does not exist",
      );
    return finish(status, actions, events, undefined, m);
  }

  switch (status.phase) {
    case "Pending": {
      if (target) {
        setPhase("Scheduling");
        break;
      }
      if (input.targetPods.length > 0) {
        fail("FailedMigration", "Migration target pod shut down before the migration started");
        break;
      }
      if (input.runningInCluster >= input.limits.perCluster || input.outboundFromNode >= input.limits.perNode) {
        requeueAfterMs =
          m.spec.priority === "system-critical" ? 1000 : m.spec.priority === "user-triggered" ? 3000 : 5000;
        break;
      }
      actions.push({ kind: "createTargetPod" });
      break;
    }
    case "Scheduling": {
      if (!target) {
        fail("FailedMigration", "Migration target pod shut down or was deleted before it was scheduled");
        break;
      }
      if (podIsReady(target)) {
        setPhase("Scheduled");
        break;
      }
      const created = Date.parse(target.metadata?.creationTimestamp ?? nowIso);
      const ageS = (now - created) / 1000;
      const unschedulable = target.status?.conditions?.some(
        (c) => c.type === "PodScheduled" && c.status === "False" && c.reason === "Unschedulable",
      );
      const unschedLimit = timeoutSeconds(
        m,
        ANNOTATION.migrationUnschedulablePodTimeoutSeconds,
        UNSCHEDULABLE_TIMEOUT_SECONDS,
      );
      const pendingLimit = timeoutSeconds(m, ANNOTATION.migrationPendingPodTimeoutSeconds, PENDING_TIMEOUT_SECONDS);
      if (unschedulable && ageS >= unschedLimit) {
        fail("FailedMigration", `Migration target pod was unschedulable for more than ${unschedLimit} seconds`);
      } else if (ageS >= pendingLimit) {
        fail("FailedMigration", `Migration target pod was pending for more than ${pendingLimit} seconds`);
      } else {
        requeueAfterMs = Math.max(1000, ((unschedulable ? unschedLimit : pendingLimit) - ageS) * 1000);
      }
      break;
    }
  }
  if (status.phase === "Scheduled" && !m.metadata?.deletionTimestamp && target) {
    actions.push({
      kind: "handoff",
      state: { ...input.handoffState(), targetPod: target.metadata?.name, targetNode: target.spec?.nodeName },
    });
    events.push({
      type: "Normal",
      reason: "PreparingTarget",
      message: "Migration target pod is ready for preparation by virt-handler.",
    });
    setPhase("PreparingTarget");
    return finish(status, actions, events, requeueAfterMs, m);
  }
  if (!PRE_HANDOFF.has(status.phase ?? "")) advanceAfterHandoff(status, vmiState, target, setPhase, fail, events);
  return finish(status, actions, events, requeueAfterMs, m);
}

function advanceAfterHandoff(
  status: VirtualMachineInstanceMigrationStatus,
  vmiState: MigrationState | undefined,
  target: Pod | undefined,
  setPhase: (p: MigrationPhase) => void,
  fail: (reason: string, message: string) => void,
  events: MigrationEvent[],
): void {
  if (vmiState) status.migrationState = { ...vmiState };
  if (vmiState?.failed) {
    fail(
      "FailedMigration",
      vmiState.failureReason
        ? `source node reported migration failed: ${vmiState.failureReason}`
        : "source node reported migration failed",
    );
    return;
  }
  if (vmiState?.completed) {
    setPhase("Succeeded");
    events.push({ type: "Normal", reason: "SuccessfulMigration", message: "Source node reported migration succeeded" });
    return;
  }
  if (!target) {
    fail("FailedMigration", "Migration target pod shut down before the migration completed");
    return;
  }
  if (status.phase === "PreparingTarget" && vmiState?.targetNodeAddress) setPhase("TargetReady");
  if (status.phase === "TargetReady" && vmiState?.startTimestamp) setPhase("Running");
}

/** The abort condition, set once: its transition time stays put while the abort is in flight (no status churn). */
function setAbortCondition(conditions: Condition[] | undefined, now: string): Condition[] {
  return setCondition(
    conditions,
    {
      type: "migrationAbortRequested",
      status: "True",
      reason: "MigrationAbortRequested",
      message: "The migration was canceled",
    },
    now,
  );
}

function finish(
  status: VirtualMachineInstanceMigrationStatus,
  actions: MigrationAction[],
  events: MigrationEvent[],
  requeueAfterMs: number | undefined,
  m: VirtualMachineInstanceMigration,
): MigrationPlan {
  const out = [...actions];
  // A finished migration needs no finalizer: cancellation is moot and GC deletes must not wait. It goes only once the
  // final phase is stored (a later pass), so a canceled VMIM is seen Failed, with its event, before it disappears.
  if (isMigrationFinal(m.status?.phase) && m.metadata?.finalizers?.length) out.push({ kind: "removeFinalizer" });
  return requeueAfterMs === undefined
    ? { status, actions: out, events }
    : { status, actions: out, events, requeueAfterMs };
}
