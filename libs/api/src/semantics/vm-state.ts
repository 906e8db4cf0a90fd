/**
 * Small readings of VM and VMI state that virt-api and virt-controller share (KubeVirt `types.go` helpers and
 * `vm.go`): the effective run strategy, final phases, pending start/stop requests, "set to start".
 */
import type { RunStrategy } from "../constants.ts";
import type { VirtualMachine, VirtualMachineInstance } from "../types.ts";

/** The run strategy a VM means: `running: true` = Always, `running: false` or nothing = Halted (`vm.RunStrategy()`). */
export function runStrategyOf(vm: VirtualMachine): RunStrategy {
  const spec = vm.spec;
  if (spec?.running !== undefined && spec.running !== null && spec.runStrategy) {
    throw new TypeError("running and runstrategy are mutually exclusive");
  }
  if (spec?.running !== undefined && spec.running !== null) return spec.running ? "Always" : "Halted";
  return spec?.runStrategy ?? "Halted";
}

/** Succeeded or Failed: the VMI will never run again (`IsFinal`). */
export function isVmiFinal(vmi: VirtualMachineInstance | undefined): boolean {
  const p = vmi?.status?.phase;
  return p === "Succeeded" || p === "Failed";
}

/** Not yet handed to a node: phase "" or Pending (`IsUnprocessed`). */
export function isVmiUnprocessed(vmi: VirtualMachineInstance): boolean {
  const p = vmi.status?.phase ?? "";
  return p === "" || p === "Pending";
}

/** The first pending state change request is a Start (`hasStartRequest`). */
export function hasStartRequest(vm: VirtualMachine): boolean {
  return vm.status?.stateChangeRequests?.[0]?.action === "Start";
}

/** The first pending request is a Stop for exactly this VMI (`hasStopRequestForVMI`). */
export function hasStopRequestForVmi(vm: VirtualMachine, vmi: VirtualMachineInstance): boolean {
  const r = vm.status?.stateChangeRequests?.[0];
  return r?.action === "Stop" && r.uid !== undefined && r.uid === vmi.metadata?.uid;
}

/** A migration of this VMI is under way: started and not ended (`migrations.IsMigrating`, evaluated at `now`). */
export function isVmiMigrating(vmi: VirtualMachineInstance, now: Date = new Date()): boolean {
  const ms = vmi.status?.migrationState;
  if (!ms?.startTimestamp || Date.parse(ms.startTimestamp) > now.getTime()) return false;
  return !(ms.endTimestamp && Date.parse(ms.endTimestamp) <= now.getTime());
}

/** Whether the VM wants a VMI to exist now (`isSetToStart`), per run strategy. */
export function isSetToStart(vm: VirtualMachine, vmi: VirtualMachineInstance | undefined): boolean {
  switch (runStrategyOf(vm)) {
    case "Always":
      return true;
    case "Halted":
      return false;
    case "Manual":
      return vmi ? !hasStopRequestForVmi(vm, vmi) : hasStartRequest(vm);
    case "RerunOnFailure":
      return vmi
        ? vmi.status?.phase !== "Succeeded"
        : hasStartRequest(vm) || vm.status?.runStrategy !== "RerunOnFailure";
    case "Once":
      return vmi === undefined;
  }
}
