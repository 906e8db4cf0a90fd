/**
 * VM subresources `start`, `stop`, `restart` and `migrate` (KubeVirt `pkg/virt-api/rest/lifecycle.go`): check
 * KubeVirt's preconditions, then write through the API server as the caller (a runStrategy patch, a
 * stateChangeRequest on the status, or a new VMIM). Success is 202 Accepted; every refusal is a Status with
 * KubeVirt's code and message.
 *
 *   start:   Halted --(spec.runStrategy=Always | Start request when --paused)--> ...
 *            Manual/RerunOnFailure --(Start request; Stop(uid)+Start if the VMI ended)--> ...
 *            Always/Once --> 409 "<strategy> does not support manual start requests"
 *   stop:    Always/Once --(spec.runStrategy=Halted)-->; Manual/RerunOnFailure --(Stop(uid) request)-->
 *   restart: anything but Halted/Once, with a VMI --(Stop(uid)+Start requests)-->
 *   migrate: VMI Running --(create VMIM generateName kubevirt-migrate-vm-)-->
 */
import { type ClusterClient, isPatchTestFailure } from "../kube/cluster-client.ts";
import { ApiError, badRequest, conflict, internalError, kubevirtResource, notFound } from "../kube/status.ts";
import {
  hasCondition,
  isFinalPhase,
  type JsonPatchOp,
  type VirtualMachine,
  type VirtualMachineInstance,
} from "../kube/types.ts";
import {
  ChangeUnderwayError,
  changeRequestPatch,
  gracePeriodPatch,
  RunStrategy,
  runningPatch,
  runStrategyOf,
} from "./patches.ts";

const VM = kubevirtResource("virtualmachine");
const VMI = kubevirtResource("virtualmachineinstance");

/** KubeVirt's `vmNotRunning`. */
export const VM_NOT_RUNNING = "VM is not running";
/** KubeVirt's `volumeMigrationManualRecoveryRequiredErr`. */
export const MANUAL_RECOVERY_REQUIRED =
  "VM recovery required: Volume migration failed, leaving some volumes pointing to non-consistent targets; manual intervention is needed to reassign them to their original volumes.";

/** Body of `start` (StartOptions). */
export interface StartOptions {
  paused?: boolean;
  dryRun?: string[];
}
/** Body of `stop` (StopOptions). */
export interface StopOptions {
  gracePeriod?: number;
  dryRun?: string[];
}
/** Body of `restart` (RestartOptions). */
export interface RestartOptions {
  gracePeriodSeconds?: number;
  dryRun?: string[];
}
/** Body of `migrate` (MigrateOptions). */
export interface MigrateOptions {
  addedNodeSelector?: Record<string, string>;
  dryRun?: string[];
}

/** Who and what a VM subresource call is about. */
export interface VmTarget {
  readonly client: ClusterClient;
  readonly namespace: string;
  readonly name: string;
}

function isDryRun(dryRun: string[] | undefined): boolean {
  return dryRun?.[0] === "All";
}

async function fetchVm(t: VmTarget): Promise<VirtualMachine> {
  let vm: VirtualMachine | undefined;
  try {
    vm = await t.client.getVm(t.namespace, t.name);
  } catch (error) {
    throw new ApiError(internalError(`unable to retrieve vm [${t.name}]: ${(error as Error).message}`));
  }
  if (!vm) throw new ApiError(notFound(VM, t.name));
  return vm;
}

async function fetchVmi(t: VmTarget): Promise<VirtualMachineInstance | undefined> {
  try {
    return await t.client.getVmi(t.namespace, t.name);
  } catch (error) {
    throw new ApiError(internalError((error as Error).message));
  }
}

function strategyOrThrow(vm: VirtualMachine): string {
  try {
    return runStrategyOf(vm);
  } catch (error) {
    throw new ApiError(internalError((error as Error).message));
  }
}

function changeRequestOrThrow(
  vm: VirtualMachine,
  ...changes: Parameters<typeof changeRequestPatch>[1][]
): JsonPatchOp[] {
  try {
    return changeRequestPatch(vm, ...changes);
  } catch (error) {
    if (error instanceof ChangeUnderwayError) throw new ApiError(internalError(error.message));
    throw error;
  }
}

/** Runs a patch, mapping a lost `test` race to 409 and anything else to 500 (KubeVirt's `patchErr` handling). */
async function writePatch(name: string, write: () => Promise<void>): Promise<void> {
  try {
    await write();
  } catch (error) {
    if (isPatchTestFailure(error)) throw new ApiError(conflict(VM, name, (error as Error).message));
    throw new ApiError(internalError((error as Error).message));
  }
}

function isLive(vmi: VirtualMachineInstance | undefined): boolean {
  const phase = vmi?.status?.phase;
  return vmi !== undefined && !isFinalPhase(phase) && phase !== "Unknown" && phase !== undefined && phase !== "";
}

/** PUT `start`. Resolves when the write is accepted (202). */
export async function startVm(t: VmTarget, options: StartOptions): Promise<void> {
  const vm = await fetchVm(t);
  const vmi = await fetchVmi(t);
  if (isLive(vmi)) throw new ApiError(conflict(VM, t.name, "VM is already running"));
  if (hasCondition(vm.status?.conditions, "ManualRecoveryRequired", "True")) {
    throw new ApiError(conflict(VM, t.name, MANUAL_RECOVERY_REQUIRED));
  }
  const data: Record<string, string> = options.paused ? { paused: "true" } : {};
  const dryRun = isDryRun(options.dryRun);
  const strategy = strategyOrThrow(vm);
  switch (strategy) {
    case RunStrategy.Halted: {
      const startsPaused = vm.spec.template?.spec.startStrategy === "Paused";
      if (options.paused && !startsPaused) {
        const patch = changeRequestOrThrow(vm, { action: "Start", data });
        return writePatch(t.name, () => t.client.patchVmStatus(t.namespace, t.name, patch, dryRun));
      }
      const patch = runningPatch(vm, true);
      return writePatch(t.name, () => t.client.patchVm(t.namespace, t.name, patch, dryRun));
    }
    case RunStrategy.RerunOnFailure:
    case RunStrategy.Manual: {
      const phase = vmi?.status?.phase;
      if (strategy === RunStrategy.RerunOnFailure && phase === "Failed") {
        throw new ApiError(conflict(VM, t.name, "RerunOnFailure does not support starting VM from failed state"));
      }
      const needsRestart =
        vmi !== undefined &&
        ((strategy === RunStrategy.RerunOnFailure && phase === "Succeeded") ||
          (strategy === RunStrategy.Manual && isFinalPhase(phase)));
      const start = { action: "Start" as const, data };
      const patch = needsRestart
        ? changeRequestOrThrow(vm, { action: "Stop", uid: vmi?.metadata.uid }, start)
        : changeRequestOrThrow(vm, start);
      return writePatch(t.name, () => t.client.patchVmStatus(t.namespace, t.name, patch, dryRun));
    }
    default:
      throw new ApiError(conflict(VM, t.name, `${strategy} does not support manual start requests`));
  }
}

/** PUT `stop`. */
export async function stopVm(t: VmTarget, options: StopOptions): Promise<void> {
  const vm = await fetchVm(t);
  const strategy = strategyOrThrow(vm);
  const vmi = await fetchVmi(t);
  const dryRun = isDryRun(options.dryRun);
  const running = vmi !== undefined && !isFinalPhase(vmi.status?.phase);
  let oldGrace = 0;
  if (running && options.gracePeriod !== undefined) {
    oldGrace = vmi.spec.terminationGracePeriodSeconds ?? 0;
    const patch = gracePeriodPatch(vmi, options.gracePeriod);
    try {
      await t.client.patchVmi(t.namespace, t.name, patch, dryRun);
    } catch (error) {
      throw new ApiError(internalError((error as Error).message));
    }
  }
  const stopRequest = (): JsonPatchOp[] => changeRequestOrThrow(vm, { action: "Stop", uid: vmi?.metadata.uid });
  switch (strategy) {
    case RunStrategy.Halted: {
      if (!running) throw new ApiError(conflict(VM, t.name, VM_NOT_RUNNING));
      const shorter =
        options.gracePeriod !== undefined &&
        (vmi.spec.terminationGracePeriodSeconds === undefined || options.gracePeriod < oldGrace);
      if (!shorter) {
        throw new ApiError(
          conflict(VM, t.name, "Halted only supports manual stop requests with a shorter graceperiod"),
        );
      }
      const patch = stopRequest();
      return writePatch(t.name, () => t.client.patchVmStatus(t.namespace, t.name, patch, dryRun));
    }
    case RunStrategy.RerunOnFailure:
    case RunStrategy.Manual: {
      if (!running) throw new ApiError(conflict(VM, t.name, VM_NOT_RUNNING));
      const patch = stopRequest();
      return writePatch(t.name, () => t.client.patchVmStatus(t.namespace, t.name, patch, dryRun));
    }
    default: {
      const patch = runningPatch(vm, false);
      return writePatch(t.name, () => t.client.patchVm(t.namespace, t.name, patch, dryRun));
    }
  }
}

/** PUT `restart`. Only a grace period of 0 (force) is accepted; force sets the VMI's grace period to 1 s first. */
export async function restartVm(t: VmTarget, options: RestartOptions): Promise<void> {
  const grace = options.gracePeriodSeconds;
  if (grace !== undefined && grace > 0) {
    throw new ApiError(badRequest("For force restart, only gracePeriod=0 is supported for now"));
  }
  if (grace !== undefined && grace < 0) throw new ApiError(badRequest("gracePeriod has to be greater or equal to 0"));
  const vm = await fetchVm(t);
  if (hasCondition(vm.status?.conditions, "VolumesChange", "True")) {
    throw new ApiError(conflict(VM, t.name, MANUAL_RECOVERY_REQUIRED));
  }
  const strategy = strategyOrThrow(vm);
  if (strategy === RunStrategy.Halted || strategy === RunStrategy.Once) {
    throw new ApiError(conflict(VM, t.name, `RunStategy ${strategy} does not support manual restart requests`));
  }
  const vmi = await fetchVmi(t);
  if (!vmi) throw new ApiError(conflict(VM, t.name, `VM is not running: ${RunStrategy.Halted}`));
  const dryRun = isDryRun(options.dryRun);
  const force = grace === 0;
  const oldGrace = vmi.spec.terminationGracePeriodSeconds;
  if (force) {
    try {
      await t.client.patchVmi(t.namespace, t.name, gracePeriodPatch(vmi, 1), dryRun);
    } catch (error) {
      throw new ApiError(internalError((error as Error).message));
    }
  }
  const patch = changeRequestOrThrow(vm, { action: "Stop", uid: vmi.metadata.uid }, { action: "Start" });
  try {
    await writePatch(t.name, () => t.client.patchVmStatus(t.namespace, t.name, patch, dryRun));
  } catch (error) {
    if (force && oldGrace !== undefined) {
      const rollback = gracePeriodPatch({ ...vmi, spec: { ...vmi.spec, terminationGracePeriodSeconds: 1 } }, oldGrace);
      await t.client.patchVmi(t.namespace, t.name, rollback, dryRun).catch(() => undefined);
    }
    throw error;
  }
}

/** PUT `migrate`: creates a VMIM (generateName `kubevirt-migrate-vm-`) for the VM's running VMI. */
export async function migrateVm(
  t: VmTarget,
  options: MigrateOptions,
  annotations?: Record<string, string>,
): Promise<void> {
  await fetchVm(t);
  const vmi = await fetchVmi(t);
  if (!vmi) throw new ApiError(notFound(VMI, t.name));
  if (vmi.status?.phase !== "Running") throw new ApiError(conflict(VM, t.name, VM_NOT_RUNNING));
  try {
    await t.client.createVmim(
      t.namespace,
      {
        metadata: { generateName: "kubevirt-migrate-vm-", ...(annotations ? { annotations } : {}) },
        spec: {
          vmiName: t.name,
          ...(options.addedNodeSelector ? { addedNodeSelector: options.addedNodeSelector } : {}),
        },
      },
      isDryRun(options.dryRun),
    );
  } catch (error) {
    throw new ApiError(internalError((error as Error).message));
  }
}
