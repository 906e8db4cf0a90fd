/**
 * The VMI phase machine on the controller side (pure; KubeVirt `watch/vmi/lifecycle.go`).
 *
 * ```
 *   "" ──> Pending ──(launcher pod exists)──> Scheduling ──(pod running and ready)──> Scheduled ──> (virt-handler)
 *             │                                   │                                     │ Running
 *             └──────── pod failed / vanished ────┴──────────> Failed <─────────────────┘ (no live launcher pod)
 * ```
 * The controller owns the phase until Scheduled; afterwards it only fails (or completes) a VMI whose launcher pod
 * failed, completed or vanished, and keeps `activePods`, the copied PodScheduled condition and the timestamps.
 */
import {
  type Condition,
  REASON,
  setCondition,
  type VirtualMachineInstance,
  type VirtualMachineInstanceStatus,
  VMI_CONDITION,
  type VmiPhase,
} from "@kvt/api";
import type { Pod } from "@kvt/kube";

/** Status reason of a VMI failed because its launcher pod failed. */
export const REASON_POD_FAILED = "PodFailed";

/** True when the pod has terminated (Succeeded or Failed). */
export function podIsFinal(pod: Pod): boolean {
  return pod.status?.phase === "Succeeded" || pod.status?.phase === "Failed";
}

/** True when the pod is Running and ready (Ready condition True; a pod without conditions counts once Running). */
export function podIsReady(pod: Pod): boolean {
  if (pod.status?.phase !== "Running" || pod.metadata?.deletionTimestamp) return false;
  const ready = pod.status.conditions?.find((c) => c.type === "Ready");
  return ready ? ready.status === "True" : true;
}

/** Pods that are alive: not terminated and not being deleted. */
export function livePods(pods: readonly Pod[]): Pod[] {
  return pods.filter((p) => !podIsFinal(p) && !p.metadata?.deletionTimestamp);
}

/** What the controller should do besides writing the status. */
export interface VmiPlan {
  readonly status: VirtualMachineInstanceStatus;
  /** Create a launcher pod. */
  readonly createPod: boolean;
}

function withPhase(status: VirtualMachineInstanceStatus, phase: VmiPhase, now: string): VirtualMachineInstanceStatus {
  if (status.phase === phase) return status;
  return {
    ...status,
    phase,
    phaseTransitionTimestamps: [...(status.phaseTransitionTimestamps ?? []), { phase, phaseTransitionTimestamp: now }],
  };
}

function fail(
  status: VirtualMachineInstanceStatus,
  reason: string,
  message: string,
  now: string,
): VirtualMachineInstanceStatus {
  const failed = withPhase({ ...status, reason }, "Failed", now);
  return {
    ...failed,
    conditions: setCondition(failed.conditions, { type: VMI_CONDITION.Ready, status: "False", reason, message }, now),
  };
}

/** The pod's PodScheduled condition, as copied onto the VMI. */
function podScheduled(pod: Pod | undefined): Condition | undefined {
  const c = pod?.status?.conditions?.find((x) => x.type === "PodScheduled");
  if (!c) return undefined;
  const out: Condition = { type: VMI_CONDITION.PodScheduled, status: c.status };
  if (c.reason) out.reason = c.reason;
  if (c.message) out.message = c.message;
  return out;
}

/**
 * Plans the controller's next step for `vmi`, given the launcher pods it owns (the migration target pod included)
 * at `now` (RFC 3339). The VMI must not be final or being deleted. `podCreated`: the controller has just created the
 * launcher pod (not yet in the cache), so the VMI moves on to Scheduling.
 */
export function planVmi(
  vmi: VirtualMachineInstance,
  pods: readonly Pod[],
  now: string,
  options: { podCreated?: boolean } = {},
): VmiPlan {
  if (options.podCreated) {
    const status = withPhase(withPhase({ ...vmi.status }, "Pending", now), "Scheduling", now);
    status.conditions = setCondition(
      status.conditions,
      { type: VMI_CONDITION.Ready, status: "False", reason: REASON.PodConditionMissing },
      now,
    );
    return { status, createPod: false };
  }
  let status: VirtualMachineInstanceStatus = { ...vmi.status };
  const phase = status.phase ?? "";
  const live = livePods(pods);
  // The pod on the VMI's node (after Scheduled), else the newest live pod.
  const current = live.find((p) => p.spec?.nodeName && p.spec.nodeName === status.nodeName) ?? live.at(-1);
  const terminated = pods.filter(podIsFinal).at(-1);
  let createPod = false;

  if (phase === "" || phase === "Pending") {
    status = withPhase(status, "Pending", now);
    if (!current) {
      if (terminated?.status?.phase === "Failed") status = fail(status, REASON_POD_FAILED, "launcher pod failed", now);
      else createPod = pods.length === 0;
    } else status = withPhase(status, "Scheduling", now);
  }
  if (status.phase === "Scheduling") {
    if (!current) {
      status = terminated
        ? fail(status, REASON_POD_FAILED, `launcher pod ${terminated.metadata?.name} ${terminated.status?.phase}`, now)
        : fail(status, REASON.PodNotExists, "launcher pod vanished", now);
    } else if (podIsReady(current)) {
      status = withPhase({ ...status, nodeName: current.spec?.nodeName }, "Scheduled", now);
    }
  } else if (status.phase === "Scheduled" || status.phase === "Running") {
    if (!current) {
      if (terminated?.status?.phase === "Succeeded") status = withPhase(status, "Succeeded", now);
      else if (terminated)
        status = fail(status, REASON_POD_FAILED, `launcher pod ${terminated.metadata?.name} failed`, now);
      else status = fail(status, REASON.PodNotExists, "launcher pod vanished", now);
    }
  }

  const active: Record<string, string> = {};
  for (const p of live) if (p.metadata?.uid && p.spec?.nodeName) active[p.metadata.uid] = p.spec.nodeName;
  if (Object.keys(active).length > 0) status.activePods = active;
  else if (status.phase !== "Failed" && status.phase !== "Succeeded") delete status.activePods;

  const scheduled = podScheduled(current);
  if (scheduled) status.conditions = setCondition(status.conditions, scheduled, now);
  if (status.phase === "Pending" || status.phase === "Scheduling") {
    const reason = !current
      ? REASON.PodNotExists
      : current.status?.conditions
        ? REASON.GuestNotRunning
        : REASON.PodConditionMissing;
    status.conditions = setCondition(status.conditions, { type: VMI_CONDITION.Ready, status: "False", reason }, now);
  }
  return { status, createPod };
}
