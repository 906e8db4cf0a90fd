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

import {
  type JsonPatchOp,
  type LifecycleError,
  type LifecyclePlan,
  type LifecycleResult,
  planRestart,
  planStart,
  planStop,
  type VirtualMachine,
  type VirtualMachineInstance,
  VM_NOT_RUNNING,
} from "@kvt/api";
import { type ApiError, badRequest, conflict, errorMessage, internalError, notFound } from "@kvt/kube";
import { type ClusterClient, isPatchTestFailure } from "../kube/cluster-client.ts";
import { fetchVm, internalOnFailure, type SubresourceTarget, VM, VMI } from "./fetch-target.ts";
import { gracePeriodPatch } from "./patches.ts";

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
export interface VmTarget extends SubresourceTarget {
  /**
   * Acts as virt-api's own service account, for the one write KubeVirt's virt-api makes on its own behalf: the VMI
   * grace-period patch before a forced stop or restart (the VMI update webhook lets only KubeVirt's service accounts
   * change a VMI's spec, so as the caller it is always refused). Defaults to `client`.
   */
  readonly internal?: ClusterClient;
}

function isDryRun(dryRun: string[] | undefined): boolean {
  return dryRun?.[0] === "All";
}

/** The VM (404 when absent) and its VMI, if any, as the caller reads them. */
async function fetchVmAndVmi(t: VmTarget): Promise<[VirtualMachine, VirtualMachineInstance | undefined]> {
  const vm = await fetchVm(t);
  return [vm, await internalOnFailure(() => t.client.getVmi(t.namespace, t.name))];
}

/** Runs a patch, mapping a lost `test` race to 409 and anything else to 500 (KubeVirt's `patchErr` handling). */
async function writePatch(name: string, write: () => Promise<void>): Promise<void> {
  try {
    await write();
  } catch (error) {
    if (isPatchTestFailure(error)) throw conflict(VM, name, errorMessage(error));
    throw internalError(errorMessage(error));
  }
}

/** A refusal from @kvt/api's plan, as the Status virt-api answers. */
function refusal(error: LifecycleError, name: string): ApiError {
  if (error.code === 409)
    return conflict(VM, name, error.message.replace(/^Operation cannot be fulfilled on [^:]+: /, ""));
  if (error.code === 400) return badRequest(error.message);
  return internalError(error.message.replace(/^Internal error occurred: /, ""));
}

/**
 * Adapts a plan's patch to RFC 6902 servers: KubeVirt guards a missing member with `test` against null, which
 * kube-apiserver's JSON-patch library accepts but a strict RFC 6902 implementation rejects; for a member that is
 * absent from the object we read, drop that `test` and turn the following `replace` into an `add`.
 */
export function portablePatch(doc: unknown, ops: readonly JsonPatchOp[]): JsonPatchOp[] {
  const absent = new Set<string>();
  const out: JsonPatchOp[] = [];
  for (const op of ops) {
    if (op.op === "test" && (op.value === null || op.value === undefined) && !hasPath(doc, op.path)) {
      absent.add(op.path);
      continue;
    }
    if (op.op === "remove") out.push({ op: "remove", path: op.path });
    else out.push({ op: op.op === "replace" && absent.has(op.path) ? "add" : op.op, path: op.path, value: op.value });
  }
  return out;
}

function hasPath(doc: unknown, pointer: string): boolean {
  let at: unknown = doc;
  for (const token of pointer.split("/").slice(1)) {
    const key = token.replaceAll("~1", "/").replaceAll("~0", "~");
    if (typeof at !== "object" || at === null || !(key in at)) return false;
    at = (at as Record<string, unknown>)[key];
  }
  return true;
}

/** Applies an accepted plan: VMI grace period first, then the VM spec or status patch. */
async function applyPlan(
  t: VmTarget,
  vm: VirtualMachine,
  vmi: VirtualMachineInstance | undefined,
  plan: LifecyclePlan,
  dryRun: boolean,
): Promise<void> {
  const oldGrace = vmi?.spec.terminationGracePeriodSeconds;
  const internal = t.internal ?? t.client;
  if (plan.vmiGracePeriodSeconds !== undefined && vmi) {
    const grace = plan.vmiGracePeriodSeconds;
    await internalOnFailure(() => internal.patchVmi(t.namespace, t.name, gracePeriodPatch(vmi, grace), dryRun));
  }
  try {
    if (plan.vmPatch) {
      const patch = portablePatch(vm, plan.vmPatch);
      await writePatch(t.name, () => t.client.patchVm(t.namespace, t.name, patch, dryRun));
    }
    if (plan.vmStatusPatch) {
      const patch = portablePatch(vm, plan.vmStatusPatch);
      await writePatch(t.name, () => t.client.patchVmStatus(t.namespace, t.name, patch, dryRun));
    }
  } catch (error) {
    if (plan.vmiGracePeriodSeconds !== undefined && vmi && oldGrace !== undefined) {
      const changed = { ...vmi, spec: { ...vmi.spec, terminationGracePeriodSeconds: plan.vmiGracePeriodSeconds } };
      await internal.patchVmi(t.namespace, t.name, gracePeriodPatch(changed, oldGrace), dryRun).catch(() => undefined);
    }
    throw error;
  }
}

type Planner<O> = (vm: VirtualMachine, vmi: VirtualMachineInstance | undefined, opts: O) => LifecycleResult;

async function runPlan<O>(t: VmTarget, planner: Planner<O>, opts: O, dryRun: string[] | undefined): Promise<void> {
  const [vm, vmi] = await fetchVmAndVmi(t);
  const result = planner(vm, vmi, opts);
  if (!result.ok) throw refusal(result.error, t.name);
  await applyPlan(t, vm, vmi, result.plan, isDryRun(dryRun));
}

/** PUT `start` (@kvt/api `planStart`). Resolves when the write is accepted (202). */
export async function startVm(t: VmTarget, options: StartOptions): Promise<void> {
  await runPlan(t, planStart, { paused: options.paused === true }, options.dryRun);
}

/** PUT `stop` (@kvt/api `planStop`). */
export async function stopVm(t: VmTarget, options: StopOptions): Promise<void> {
  await runPlan(
    t,
    planStop,
    options.gracePeriod === undefined ? {} : { gracePeriod: options.gracePeriod },
    options.dryRun,
  );
}

/** PUT `restart` (@kvt/api `planRestart`): only a grace period of 0 (force) is accepted. */
export async function restartVm(t: VmTarget, options: RestartOptions): Promise<void> {
  const grace = options.gracePeriodSeconds;
  if (grace !== undefined && grace !== 0) {
    // Refused before any read, as KubeVirt does.
    const result = planRestart({ metadata: { name: t.name }, spec: {} } as unknown as VirtualMachine, undefined, {
      gracePeriodSeconds: grace,
    });
    if (!result.ok) throw refusal(result.error, t.name);
  }
  await runPlan(t, planRestart, grace === undefined ? {} : { gracePeriodSeconds: grace }, options.dryRun);
}

/** PUT `migrate`: creates a VMIM (generateName `kubevirt-migrate-vm-`) for the VM's running VMI. */
export async function migrateVm(
  t: VmTarget,
  options: MigrateOptions,
  annotations?: Record<string, string>,
): Promise<void> {
  const [, vmi] = await fetchVmAndVmi(t);
  if (!vmi) throw notFound(VMI, t.name);
  if (vmi.status?.phase !== "Running") throw conflict(VM, t.name, VM_NOT_RUNNING);
  const migration = {
    metadata: { generateName: "kubevirt-migrate-vm-", ...(annotations ? { annotations } : {}) },
    spec: {
      vmiName: t.name,
      ...(options.addedNodeSelector ? { addedNodeSelector: options.addedNodeSelector } : {}),
    },
  };
  await internalOnFailure(() => t.client.createVmim(t.namespace, migration, isDryRun(options.dryRun)));
}
