/**
 * The JSON patches virt-api's VM lifecycle subresources write (KubeVirt `lifecycle.go`): state-change requests on
 * `vm.status`, the runStrategy/running flip on `vm.spec`, and the VMI grace-period override. Each guards the
 * value it read with an RFC 6902 `test`, so a concurrent writer makes the API server reject the patch and the
 * caller gets a 409. Pure functions.
 *
 * Deviation: KubeVirt tests a missing member against `null` (which its Go JSON-patch library accepts); RFC 6902
 * fails a `test` on a missing path, so for a missing member these patches use `add` without a `test`.
 */
import type { JsonPatchOp, StateChangeRequest, VirtualMachine, VirtualMachineInstance } from "../kube/types.ts";

/** The run strategies of kubevirt.io/v1. */
export const RunStrategy = {
  Always: "Always",
  Halted: "Halted",
  Manual: "Manual",
  RerunOnFailure: "RerunOnFailure",
  Once: "Once",
  WaitAsReceiver: "WaitAsReceiver",
} as const;

/** The VM's effective run strategy (`vm.RunStrategy()`): `running` maps to Always/Halted; neither means Halted. */
export function runStrategyOf(vm: VirtualMachine): string {
  const { running, runStrategy } = vm.spec;
  if (running !== undefined && runStrategy !== undefined) {
    throw new Error("running and runstrategy are mutually exclusive");
  }
  if (running !== undefined) return running ? RunStrategy.Always : RunStrategy.Halted;
  return runStrategy ?? RunStrategy.Halted;
}

/** Thrown when a request is already pending and the new one is not a lone Stop (KubeVirt answers 500). */
export class ChangeUnderwayError extends Error {
  constructor() {
    super("unable to complete request: stop/start already underway");
    this.name = "ChangeUnderwayError";
  }
}

function isEmptyStatus(status: VirtualMachine["status"]): boolean {
  return status === undefined || Object.keys(status).length === 0;
}

/** `getChangeRequestJson`: appends `changes` to `vm.status.stateChangeRequests`, guarded by a `test`. */
export function changeRequestPatch(vm: VirtualMachine, ...changes: StateChangeRequest[]): JsonPatchOp[] {
  const ops: JsonPatchOp[] = [];
  if (isEmptyStatus(vm.status)) {
    ops.push({ op: "add", path: "/status", value: { stateChangeRequests: changes } });
    return ops;
  }
  const current = vm.status?.stateChangeRequests;
  if (current !== undefined) ops.push({ op: "test", path: "/status/stateChangeRequests", value: current });
  if (current === undefined || current.length === 0) {
    ops.push({ op: "add", path: "/status/stateChangeRequests", value: changes });
  } else if (changes.length === 1 && changes[0]?.action === "Stop") {
    ops.push({ op: "replace", path: "/status/stateChangeRequests", value: changes });
  } else {
    throw new ChangeUnderwayError();
  }
  if (vm.status?.startFailure !== undefined) ops.push({ op: "remove", path: "/status/startFailure" });
  return ops;
}

/** `getRunningPatch`: flips `spec.runStrategy` to Always/Halted (or legacy `spec.running`), guarded by a `test`. */
export function runningPatch(vm: VirtualMachine, running: boolean): JsonPatchOp[] {
  if (vm.spec.runStrategy !== undefined) {
    return [
      { op: "test", path: "/spec/runStrategy", value: vm.spec.runStrategy },
      { op: "replace", path: "/spec/runStrategy", value: running ? RunStrategy.Always : RunStrategy.Halted },
    ];
  }
  if (vm.spec.running !== undefined) {
    return [
      { op: "test", path: "/spec/running", value: vm.spec.running },
      { op: "replace", path: "/spec/running", value: running },
    ];
  }
  return [{ op: "add", path: "/spec/running", value: running }];
}

/** `patchVMITerminationGracePeriod`: sets the VMI's grace period, guarded by a `test` on the old value. */
export function gracePeriodPatch(vmi: VirtualMachineInstance, gracePeriod: number): JsonPatchOp[] {
  const old = vmi.spec.terminationGracePeriodSeconds;
  if (old === undefined) return [{ op: "add", path: "/spec/terminationGracePeriodSeconds", value: gracePeriod }];
  return [
    { op: "test", path: "/spec/terminationGracePeriodSeconds", value: old },
    { op: "replace", path: "/spec/terminationGracePeriodSeconds", value: gracePeriod },
  ];
}
