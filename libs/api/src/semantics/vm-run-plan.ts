/**
 * What the VM controller does with the VMI for each run strategy (KubeVirt `vm.go syncRunStrategy`), as a pure
 * decision. The controller applies it (create the VMI from the template, delete it, patch the VM).
 *
 * | strategy       | VMI exists                                          | no VMI                                   |
 * | -------------- | --------------------------------------------------- | ---------------------------------------- |
 * | Always         | final, or Stop request for it: delete               | create (after the crash-loop backoff)    |
 * | RerunOnFailure | Failed: delete + Start request; Succeeded/Stop: delete | create on a Start request or a strategy change (after backoff) |
 * | Manual         | Stop request for it: delete                         | create on a Start request                |
 * | Halted         | delete                                              | Start request: set the strategy to Always |
 * | Once           | nothing                                             | create                                   |
 *
 * Before any strategy, a VM being deleted (`metadata.deletionTimestamp`) only stops its VMI, and not even that when
 * it is deleted with `--cascade=orphan` (the `orphan` finalizer): the garbage collector then releases the VMI.
 */
import type { VirtualMachine, VirtualMachineInstance } from "../types.ts";
import { startBackoffRemainingSeconds } from "./start-backoff.ts";
import { hasStartRequest, hasStopRequestForVmi, isVmiFinal, runStrategyOf } from "./vm-state.ts";

/** The decision for one reconcile of a VM. */
export type VmRunAction =
  | { action: "none" }
  | { action: "createVmi" }
  | { action: "deleteVmi"; thenRequestStart: boolean }
  | { action: "waitBackoff"; seconds: number }
  | { action: "setRunStrategyAlways" }
  | { action: "invalid"; message: string };

const NONE: VmRunAction = { action: "none" };

function deleteUnlessDeleting(vmi: VirtualMachineInstance, thenRequestStart = false): VmRunAction {
  // stopVMI does nothing for a VMI already being deleted; the controller waits for it to go.
  return vmi.metadata?.deletionTimestamp ? NONE : { action: "deleteVmi", thenRequestStart };
}

function createAfterBackoff(vm: VirtualMachine, now: Date): VmRunAction {
  const seconds = startBackoffRemainingSeconds(vm, now);
  return seconds > 0 ? { action: "waitBackoff", seconds } : { action: "createVmi" };
}

/** Kubernetes' finalizer for `--cascade=orphan` deletions (`metav1.FinalizerOrphanDependents`). */
const ORPHAN_FINALIZER = "orphan";

/** The action for `vm` given its VMI (if any) at time `now`. */
export function planVmRun(vm: VirtualMachine, vmi: VirtualMachineInstance | undefined, now: Date): VmRunAction {
  if (vm.metadata?.deletionTimestamp) {
    // KubeVirt `vm.go sync`: a deleted VM stops its VMI unless its dependents are to be orphaned.
    if (!vmi || vm.metadata.finalizers?.includes(ORPHAN_FINALIZER)) return NONE;
    return deleteUnlessDeleting(vmi);
  }
  let strategy: ReturnType<typeof runStrategyOf>;
  try {
    strategy = runStrategyOf(vm);
  } catch (err) {
    return { action: "invalid", message: (err as Error).message };
  }
  switch (strategy) {
    case "Always":
      if (vmi) return hasStopRequestForVmi(vm, vmi) || isVmiFinal(vmi) ? deleteUnlessDeleting(vmi) : NONE;
      return createAfterBackoff(vm, now);
    case "RerunOnFailure": {
      if (vmi) {
        const failed = vmi.status?.phase === "Failed";
        const done = failed || vmi.status?.phase === "Succeeded" || hasStopRequestForVmi(vm, vmi);
        return done ? deleteUnlessDeleting(vmi, failed) : NONE;
      }
      if (!hasStartRequest(vm) && vm.status?.runStrategy === "RerunOnFailure") return NONE;
      return createAfterBackoff(vm, now);
    }
    case "Manual":
      if (vmi) return hasStopRequestForVmi(vm, vmi) ? deleteUnlessDeleting(vmi) : NONE;
      return hasStartRequest(vm) ? { action: "createVmi" } : NONE;
    case "Halted":
      if (vmi) return deleteUnlessDeleting(vmi);
      return hasStartRequest(vm) ? { action: "setRunStrategyAlways" } : NONE;
    case "Once":
      return vmi ? NONE : { action: "createVmi" };
  }
}
