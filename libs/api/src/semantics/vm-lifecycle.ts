/**
 * What virt-api's start, stop and restart subresources do for each run strategy (KubeVirt `rest/lifecycle.go`),
 * as pure plans: either an error Status (409/400/500 with KubeVirt's exact messages) or the JSON patches to send.
 *
 * | strategy        | start                                      | stop                                   | restart            |
 * | --------------- | ------------------------------------------ | -------------------------------------- | ------------------ |
 * | Always          | 409 "Always does not support manual start" | spec -> Halted                         | [Stop(uid), Start] |
 * | RerunOnFailure  | Start req; Succeeded VMI: [Stop, Start]; Failed VMI: 409 | Stop req; 409 if not running | [Stop(uid), Start] |
 * | Manual          | Start req; final VMI: [Stop, Start]        | Stop req; 409 if not running           | [Stop(uid), Start] |
 * | Halted          | spec -> Always; paused: Start req          | 409 unless a shorter grace period      | 409                |
 * | Once            | 409                                        | spec -> Halted                         | 409                |
 * Every start is 409 while a VMI runs or with ManualRecoveryRequired; restart is 409 without a VMI.
 */
import { START_REQUEST_DATA_PAUSED_KEY, VM_CONDITION, VMI_CONDITION } from "../constants.ts";
import type { VirtualMachine, VirtualMachineInstance, VirtualMachineStateChangeRequest } from "../types.ts";
import { hasCondition } from "./conditions.ts";
import { isVmiFinal, runStrategyOf } from "./vm-state.ts";

/** One RFC 6902 operation. */
export interface JsonPatchOp {
  op: "add" | "remove" | "replace" | "test";
  path: string;
  value?: unknown;
}

/** A refused request, shaped as the Kubernetes Status virt-api writes. */
export interface LifecycleError {
  code: 400 | 409 | 500;
  reason: "BadRequest" | "Conflict" | "InternalError";
  message: string;
}

/** What to do for an accepted request (answer 202 Accepted after applying it). */
export interface LifecyclePlan {
  /** JSON patch for the VM's main resource (run strategy changes). */
  vmPatch?: JsonPatchOp[];
  /** JSON patch for the VM's status subresource (state change requests). */
  vmStatusPatch?: JsonPatchOp[];
  /** Set the VMI's terminationGracePeriodSeconds to this first (stop with a grace period, force restart). */
  vmiGracePeriodSeconds?: number;
}

/** Either a plan or an error. */
export type LifecycleResult = { ok: true; plan: LifecyclePlan } | { ok: false; error: LifecycleError };

/** "VM is not running" (KubeVirt `vmNotRunning`). */
export const VM_NOT_RUNNING = "VM is not running";
/** Message for a VM that needs manual recovery after a failed volume migration. */
export const MANUAL_RECOVERY_REQUIRED =
  "VM recovery required: Volume migration failed, leaving some volumes pointing to non-consistent targets; manual intervention is needed to reassign them to their original volumes.";
/** Message when a start/stop is already pending. */
export const CHANGE_UNDERWAY = "unable to complete request: stop/start already underway";

/** apimachinery `NewConflict` for a VM: `Operation cannot be fulfilled on virtualmachine.kubevirt.io "<name>": <msg>`. */
export function conflict(name: string, message: string): LifecycleError {
  return {
    code: 409,
    reason: "Conflict",
    message: `Operation cannot be fulfilled on virtualmachine.kubevirt.io "${name}": ${message}`,
  };
}

/** apimachinery `NewInternalError`: `Internal error occurred: <msg>`. */
export function internalError(message: string): LifecycleError {
  return { code: 500, reason: "InternalError", message: `Internal error occurred: ${message}` };
}

/** apimachinery `NewBadRequest`. */
export function badRequest(message: string): LifecycleError {
  return { code: 400, reason: "BadRequest", message };
}

const fail = (error: LifecycleError): LifecycleResult => ({ ok: false, error });
const ok = (plan: LifecyclePlan): LifecycleResult => ({ ok: true, plan });

/**
 * The status patch that appends state change requests (KubeVirt `getChangeRequestJson`): guarded by a `test` of the
 * current list so concurrent requests conflict; a lone Stop replaces pending requests; anything else while requests
 * are pending is refused. Also clears `startFailure`, since a user action resets the crash-loop backoff.
 */
export function changeRequestPatch(
  vm: VirtualMachine,
  changes: VirtualMachineStateChangeRequest[],
): JsonPatchOp[] | LifecycleError {
  const ops: JsonPatchOp[] = [];
  const status = vm.status ?? {};
  const pending = status.stateChangeRequests ?? [];
  if (Object.keys(status).length === 0) {
    ops.push({ op: "add", path: "/status", value: { stateChangeRequests: changes } });
  } else {
    ops.push({ op: "test", path: "/status/stateChangeRequests", value: status.stateChangeRequests ?? null });
    if (pending.length === 0) ops.push({ op: "add", path: "/status/stateChangeRequests", value: changes });
    else if (changes.length === 1 && changes[0]?.action === "Stop")
      ops.push({ op: "replace", path: "/status/stateChangeRequests", value: changes });
    else return internalError(CHANGE_UNDERWAY);
  }
  if (status.startFailure) ops.push({ op: "remove", path: "/status/startFailure" });
  return ops;
}

/** The spec patch switching a VM on (Always) or off (Halted), in whichever field the VM uses (`getRunningPatch`). */
export function runningPatch(vm: VirtualMachine, running: boolean): JsonPatchOp[] {
  if (vm.spec.runStrategy) {
    return [
      { op: "test", path: "/spec/runStrategy", value: vm.spec.runStrategy },
      { op: "replace", path: "/spec/runStrategy", value: running ? "Always" : "Halted" },
    ];
  }
  return [
    { op: "test", path: "/spec/running", value: vm.spec.running ?? null },
    { op: "replace", path: "/spec/running", value: running },
  ];
}

function statusPlan(
  vm: VirtualMachine,
  changes: VirtualMachineStateChangeRequest[],
  extra: LifecyclePlan = {},
): LifecycleResult {
  const patch = changeRequestPatch(vm, changes);
  return Array.isArray(patch) ? ok({ ...extra, vmStatusPatch: patch }) : fail(patch);
}

const vmName = (vm: VirtualMachine): string => vm.metadata?.name ?? "";
const uidOf = (vmi: VirtualMachineInstance): string => vmi.metadata?.uid ?? "";

/** PUT .../virtualmachines/{name}/start with StartOptions{paused}. */
export function planStart(
  vm: VirtualMachine,
  vmi: VirtualMachineInstance | undefined,
  opts: { paused?: boolean } = {},
): LifecycleResult {
  const name = vmName(vm);
  const phase = vmi?.status?.phase ?? "";
  if (vmi && !isVmiFinal(vmi) && phase !== "Unknown" && phase !== "")
    return fail(conflict(name, "VM is already running"));
  if (hasCondition(vm.status?.conditions, VM_CONDITION.ManualRecoveryRequired))
    return fail(conflict(name, MANUAL_RECOVERY_REQUIRED));
  const data = opts.paused ? { [START_REQUEST_DATA_PAUSED_KEY]: "true" } : undefined;
  const start: VirtualMachineStateChangeRequest = data ? { action: "Start", data } : { action: "Start" };
  let strategy: ReturnType<typeof runStrategyOf>;
  try {
    strategy = runStrategyOf(vm);
  } catch (err) {
    return fail(internalError((err as Error).message));
  }
  switch (strategy) {
    case "Halted":
      // A paused start goes through the controller (it flips the strategy and starts paused) unless the template already starts paused.
      if (opts.paused && vm.spec.template?.spec?.startStrategy !== "Paused") return statusPlan(vm, [start]);
      return ok({ vmPatch: runningPatch(vm, true) });
    case "RerunOnFailure":
    case "Manual": {
      const restart =
        (strategy === "RerunOnFailure" && phase === "Succeeded") ||
        (strategy === "Manual" && vmi !== undefined && isVmiFinal(vmi));
      if (!restart && strategy === "RerunOnFailure" && phase === "Failed") {
        return fail(conflict(name, "RerunOnFailure does not support starting VM from failed state"));
      }
      return statusPlan(vm, restart && vmi ? [{ action: "Stop", uid: uidOf(vmi) }, start] : [start]);
    }
    case "Always":
    case "Once":
      return fail(conflict(name, `${strategy} does not support manual start requests`));
  }
}

/** PUT .../virtualmachines/{name}/stop with StopOptions{gracePeriod}. */
export function planStop(
  vm: VirtualMachine,
  vmi: VirtualMachineInstance | undefined,
  opts: { gracePeriod?: number } = {},
): LifecycleResult {
  const name = vmName(vm);
  let strategy: ReturnType<typeof runStrategyOf>;
  try {
    strategy = runStrategyOf(vm);
  } catch (err) {
    return fail(internalError((err as Error).message));
  }
  const running = vmi !== undefined && !isVmiFinal(vmi);
  const grace: LifecyclePlan =
    running && opts.gracePeriod !== undefined ? { vmiGracePeriodSeconds: opts.gracePeriod } : {};
  const stop = (): VirtualMachineStateChangeRequest[] => [{ action: "Stop", uid: vmi ? uidOf(vmi) : "" }];
  switch (strategy) {
    case "Halted": {
      if (!running) return fail(conflict(name, VM_NOT_RUNNING));
      const current = vmi.spec?.terminationGracePeriodSeconds;
      // Halted VMs are already stopping: only a shorter grace period (a force stop) makes sense.
      if (opts.gracePeriod === undefined || (current !== undefined && opts.gracePeriod >= current)) {
        return fail(conflict(name, "Halted only supports manual stop requests with a shorter graceperiod"));
      }
      return statusPlan(vm, stop(), grace);
    }
    case "RerunOnFailure":
    case "Manual":
      if (!running) return fail(conflict(name, VM_NOT_RUNNING));
      return statusPlan(vm, stop(), grace);
    case "Always":
    case "Once":
      return ok({ ...grace, vmPatch: runningPatch(vm, false) });
  }
}

/** PUT .../virtualmachines/{name}/restart with RestartOptions{gracePeriodSeconds} (only 0 = force). */
export function planRestart(
  vm: VirtualMachine,
  vmi: VirtualMachineInstance | undefined,
  opts: { gracePeriodSeconds?: number } = {},
): LifecycleResult {
  const name = vmName(vm);
  if (opts.gracePeriodSeconds !== undefined && opts.gracePeriodSeconds > 0) {
    return fail(badRequest("For force restart, only gracePeriod=0 is supported for now"));
  }
  if (opts.gracePeriodSeconds !== undefined && opts.gracePeriodSeconds < 0)
    return fail(badRequest("gracePeriod has to be greater or equal to 0"));
  if (hasCondition(vm.status?.conditions, VMI_CONDITION.VolumesChange))
    return fail(conflict(name, MANUAL_RECOVERY_REQUIRED));
  let strategy: ReturnType<typeof runStrategyOf>;
  try {
    strategy = runStrategyOf(vm);
  } catch (err) {
    return fail(internalError((err as Error).message));
  }
  if (strategy === "Halted" || strategy === "Once")
    return fail(conflict(name, `RunStategy ${strategy} does not support manual restart requests`));
  if (!vmi) return fail(conflict(name, "VM is not running: Halted"));
  // A force restart first shortens the VMI's grace period to 1 s so the guest goes down promptly.
  const extra: LifecyclePlan = opts.gracePeriodSeconds === 0 ? { vmiGracePeriodSeconds: 1 } : {};
  return statusPlan(vm, [{ action: "Stop", uid: uidOf(vmi) }, { action: "Start" }], extra);
}
