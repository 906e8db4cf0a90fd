/**
 * The VM status the controller writes (pure): created, ready, printableStatus, conditions (Ready, Failure,
 * RestartRequired, plus the VMI's other conditions copied), stateChangeRequests cleanup, startFailure, runStrategy
 * and generations. printableStatus (KubeVirt's precedence) and the crash-loop record come from @kvt/api.
 */
import {
  type Condition,
  findCondition,
  hasCondition,
  isVmiFinal,
  nextStartFailure,
  printableStatus,
  type RandomInt,
  type RunStrategy,
  removeCondition,
  runStrategyOf,
  setCondition,
  type VirtualMachine,
  type VirtualMachineInstance,
  type VirtualMachineStatus,
  VM_CONDITION,
  VMI_CONDITION,
} from "@kvt/api";
import { restartRequired } from "./vmi-template.ts";

/** Inputs besides the VM and VMI. */
export interface VmStatusInput {
  /** Epoch ms. */
  readonly now: number;
  /** The error of this reconcile's actions, if any: it becomes the Failure condition. */
  readonly syncError?: { reason: string; message: string };
  /** This reconcile asked for the VMI's deletion (KubeVirt's pending deletion expectation): printableStatus Stopping. */
  readonly stopExpected?: boolean;
  /** `rand.Intn` for the crash-loop jitter; injected by tests. */
  readonly random?: RandomInt;
}

/** The run strategy in force, or undefined for an invalid VM (running and runStrategy both set). */
function runStrategyOrUndefined(vm: VirtualMachine): RunStrategy | undefined {
  try {
    return runStrategyOf(vm);
  } catch {
    // The reconcile reports the invalid VM as a Failure; the status just leaves runStrategy as it was.
    return undefined;
  }
}

/** Requests left after dropping the ones already carried out (KubeVirt processes only element [0]). */
export function remainingRequests(
  vm: VirtualMachine,
  vmi: VirtualMachineInstance | undefined,
): VirtualMachineStatus["stateChangeRequests"] {
  const reqs = vm.status?.stateChangeRequests;
  if (!reqs?.length) return reqs;
  const [first, ...rest] = reqs;
  const live = vmi && !isVmiFinal(vmi) && !vmi.metadata?.deletionTimestamp;
  const doneStop = first.action === "Stop" && (!vmi || (first.uid !== undefined && first.uid !== vmi.metadata?.uid));
  const doneStart = first.action === "Start" && live;
  if (!doneStop && !doneStart) return reqs;
  return rest.length ? rest : undefined;
}

const NOT_COPIED: ReadonlySet<string> = new Set([
  VM_CONDITION.Ready,
  VM_CONDITION.Failure,
  VM_CONDITION.RestartRequired,
]);

function conditionsFor(vm: VirtualMachine, vmi: VirtualMachineInstance | undefined, input: VmStatusInput): Condition[] {
  const now = new Date(input.now).toISOString();
  let conds = (vm.status?.conditions ?? []).filter((c) => NOT_COPIED.has(c.type));
  for (const c of vmi?.status?.conditions ?? []) if (!NOT_COPIED.has(c.type)) conds.push(c);
  const ready = findCondition(vmi?.status?.conditions, VMI_CONDITION.Ready);
  conds = setCondition(
    conds,
    vmi
      ? { type: VM_CONDITION.Ready, status: ready?.status ?? "False", reason: ready?.reason, message: ready?.message }
      : { type: VM_CONDITION.Ready, status: "False", reason: "VMINotExists", message: "VMI does not exist" },
    now,
  );
  conds = input.syncError
    ? setCondition(conds, { type: VM_CONDITION.Failure, status: "True", ...input.syncError }, now)
    : removeCondition(conds, VM_CONDITION.Failure);
  conds =
    vmi && restartRequired(vm, vmi)
      ? setCondition(
          conds,
          {
            type: VM_CONDITION.RestartRequired,
            status: "True",
            message: "a non-live-updatable field was changed in the template spec",
          },
          now,
        )
      : removeCondition(conds, VM_CONDITION.RestartRequired);
  return conds
    .map((c) => (c.reason === undefined ? omit(c, "reason") : c))
    .map((c) => (c.message === undefined ? omit(c, "message") : c));
}

function omit<T extends object, K extends keyof T>(obj: T, key: K): Omit<T, K> {
  const { [key]: _drop, ...rest } = obj;
  return rest;
}

/** The VM status to write. Fields the controller does not own are carried over from `vm.status`. */
export function computeVmStatus(
  vm: VirtualMachine,
  vmi: VirtualMachineInstance | undefined,
  input: VmStatusInput,
): VirtualMachineStatus {
  const vmiForStatus = vmi && isOwnedBy(vmi, vm) ? vmi : undefined;
  const status: VirtualMachineStatus = { ...vm.status };
  status.created = !!vmiForStatus;
  status.ready = !!vmiForStatus && hasCondition(vmiForStatus.status?.conditions, VMI_CONDITION.Ready);
  const now = new Date(input.now);
  const startFailure = nextStartFailure(vm, vmiForStatus, now, input.random);
  if (startFailure) status.startFailure = startFailure;
  else delete status.startFailure;
  const withFailure: VirtualMachine = { ...vm, status: { ...vm.status, startFailure } };
  status.printableStatus = printableStatus({
    vm: withFailure,
    vmi: vmiForStatus,
    stopExpected: input.stopExpected,
    now,
  });
  status.conditions = conditionsFor(vm, vmiForStatus, input);
  const requests = remainingRequests(vm, vmiForStatus);
  if (requests) status.stateChangeRequests = requests;
  else delete status.stateChangeRequests;
  const runStrategy = runStrategyOrUndefined(vm);
  if (vmiForStatus && runStrategy) status.runStrategy = runStrategy;
  if (vm.metadata?.generation !== undefined) status.desiredGeneration = vm.metadata.generation;
  const created = vmiForStatus?.metadata?.annotations?.["kubevirt.io/vm-generation"];
  if (created !== undefined) status.observedGeneration = Number(created);
  return status;
}

/** True when `vm` is the controller owner of `vmi`. */
export function isOwnedBy(vmi: VirtualMachineInstance, vm: VirtualMachine): boolean {
  return !!vmi.metadata?.ownerReferences?.some((o) => o.controller && o.uid === vm.metadata?.uid);
}
