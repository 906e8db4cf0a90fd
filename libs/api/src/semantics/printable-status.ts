/**
 * The VM's `status.printableStatus` (KubeVirt `vm.go setPrintableStatus`): several statuses may hold at once, and
 * the first match in this order wins:
 *
 *   Terminating > Stopping > Migrating > Paused > Running > ErrorPvcNotFound > DataVolumeError >
 *   ErrorUnschedulable > Provisioning > WaitingForVolumeBinding > ErrImagePull > ImagePullBackOff > Starting >
 *   CrashLoopBackOff > Stopped > WaitingForReceiver > (fallback) Unknown
 */
import type { PrintableStatus } from "../constants.ts";
import type { VirtualMachine, VirtualMachineInstance } from "../types.ts";
import { findCondition, hasCondition } from "./conditions.ts";
import { isSetToStart, isVmiFinal, isVmiMigrating, isVmiUnprocessed, runStrategyOf } from "./vm-state.ts";

/** What the VM controller knows besides the two objects. */
export interface PrintableStatusInput {
  vm: VirtualMachine;
  /** The VMI of the same name, if it exists. */
  vmi?: VirtualMachineInstance | undefined;
  /** The controller has asked for a VMI to be created and not yet seen it (creation expectations pending). */
  startExpected?: boolean;
  /** The controller has asked for the VMI to be deleted and not yet seen it go. */
  stopExpected?: boolean;
  /** A DataVolume of the template is still provisioning. */
  dataVolumeProvisioning?: boolean;
  /** A DataVolume of the template has failed. */
  dataVolumeError?: boolean;
  /** A PVC of the template is not bound yet. */
  pvcUnbound?: boolean;
  /** Evaluation time (migration start/end comparisons). */
  now?: Date;
}

type Rule = [PrintableStatus, (i: PrintableStatusInput) => boolean];

const syncReason = (vmi: VirtualMachineInstance | undefined, reason: string): boolean => {
  const c = findCondition(vmi?.status?.conditions, "Synchronized");
  return c?.status === "False" && c.reason === reason;
};
const paused = (vmi: VirtualMachineInstance): boolean => hasCondition(vmi.status?.conditions, "Paused");
const strategyOrUndefined = (vm: VirtualMachine): string | undefined => {
  try {
    return runStrategyOf(vm);
  } catch {
    // An invalid VM (running + runStrategy) matches no strategy-dependent status, as in KubeVirt.
    return undefined;
  }
};

const RULES: Rule[] = [
  ["Terminating", ({ vm }) => Boolean(vm.metadata?.deletionTimestamp)],
  [
    "Stopping",
    ({ vmi, stopExpected }) =>
      vmi !== undefined && !isVmiFinal(vmi) && (Boolean(vmi.metadata?.deletionTimestamp) || Boolean(stopExpected)),
  ],
  ["Migrating", ({ vmi, now }) => vmi !== undefined && isVmiMigrating(vmi, now)],
  ["Paused", ({ vmi }) => vmi?.status?.phase === "Running" && paused(vmi)],
  ["Running", ({ vmi }) => vmi?.status?.phase === "Running" && !paused(vmi)],
  ["ErrorPvcNotFound", ({ vmi }) => syncReason(vmi, "FailedPvcNotFound")],
  ["DataVolumeError", ({ dataVolumeError }) => Boolean(dataVolumeError)],
  [
    "ErrorUnschedulable",
    ({ vmi }) => {
      const c = findCondition(vmi?.status?.conditions, "PodScheduled");
      return c?.status === "False" && c.reason === "Unschedulable";
    },
  ],
  ["Provisioning", ({ dataVolumeProvisioning }) => Boolean(dataVolumeProvisioning)],
  ["WaitingForVolumeBinding", ({ vm, vmi, pvcUnbound }) => Boolean(pvcUnbound) && safeSetToStart(vm, vmi)],
  ["ErrImagePull", ({ vmi }) => syncReason(vmi, "ErrImagePull")],
  ["ImagePullBackOff", ({ vmi }) => syncReason(vmi, "ImagePullBackOff")],
  [
    "Starting",
    ({ vmi, startExpected }) => {
      if (!vmi) return Boolean(startExpected);
      const p = vmi.status?.phase;
      return isVmiUnprocessed(vmi) || p === "Scheduling" || p === "Scheduled";
    },
  ],
  [
    "CrashLoopBackOff",
    ({ vm, vmi, startExpected }) => {
      if ((vmi && !isVmiFinal(vmi)) || startExpected) return false;
      const s = strategyOrUndefined(vm);
      const count = vm.status?.startFailure?.consecutiveFailCount ?? 0;
      return count > 0 && (s === "Always" || s === "RerunOnFailure" || s === "Once");
    },
  ],
  ["Stopped", ({ vmi, startExpected }) => (vmi ? isVmiFinal(vmi) : !startExpected)],
  [
    "WaitingForReceiver",
    ({ vm, vmi }) =>
      (vmi === undefined || vmi.status?.phase === "WaitingForSync") && strategyOrUndefined(vm) === "WaitAsReceiver",
  ],
];

function safeSetToStart(vm: VirtualMachine, vmi: VirtualMachineInstance | undefined): boolean {
  try {
    return isSetToStart(vm, vmi);
  } catch {
    // Invalid strategy: not set to start (KubeVirt logs and returns false).
    return false;
  }
}

/** The printable status for the VM, first matching rule wins, else "Unknown". */
export function printableStatus(input: PrintableStatusInput): PrintableStatus {
  for (const [status, holds] of RULES) if (holds(input)) return status;
  return "Unknown";
}

/** The precedence order, highest first (for documentation and tests). */
export const PRINTABLE_STATUS_PRECEDENCE: readonly PrintableStatus[] = RULES.map(([s]) => s);
