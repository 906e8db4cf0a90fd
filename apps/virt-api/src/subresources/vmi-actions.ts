/**
 * VMI subresources that virt-handler carries out: `pause`, `unpause`, `softreboot` (PUT) and `guestosinfo` (GET),
 * plus the console precondition. Each fetches the VMI as the caller, checks KubeVirt's preconditions
 * (`lifecycle.go`, `subresource.go`, `console.go`) and only then calls the VMI's virt-handler.
 */

import { findCondition, hasCondition, type VirtualMachineInstance, VM_NOT_RUNNING } from "@kvt/api";
import { type ApiError, badRequest, conflict, forbidden } from "@kvt/kube";
import type { HandlerClient } from "../handler/handler-client.ts";
import { fetchVmi, getVm, internalOnFailure, type SubresourceTarget, VM, VMI } from "./fetch-target.ts";

/** What a VMI subresource call needs. */
export interface VmiTarget extends SubresourceTarget {
  readonly handler: HandlerClient;
}

/** Body of `pause` / `unpause` (PauseOptions / UnpauseOptions). */
export interface PauseOptions {
  dryRun?: string[];
}

function refuse(refusal: ApiError | undefined): void {
  if (refusal) throw refusal;
}

/** PUT `pause`. */
export async function pauseVmi(t: VmiTarget, options: PauseOptions): Promise<void> {
  const vmi = await fetchVmi(t);
  refuse(validatePause(vmi));
  if (options.dryRun?.[0] === "All") return;
  await internalOnFailure(() => t.handler.put(vmi, "pause", options));
}

/** Pause preconditions: Running, no non-GuestAgentPing liveness probe, not already paused. */
export function validatePause(vmi: VirtualMachineInstance): ApiError | undefined {
  const name = vmi.metadata?.name ?? "";
  if (vmi.status?.phase !== "Running") return conflict(VMI, name, VM_NOT_RUNNING);
  const probe = vmi.spec.livenessProbe;
  if (probe !== undefined && probe.guestAgentPing === undefined) {
    return forbidden(VMI, name, "Pausing VMIs with a non-GuestAgentPing LivenessProbe is not supported");
  }
  if (findCondition(vmi.status.conditions, "Paused") !== undefined) return conflict(VMI, name, "VMI is already paused");
  return undefined;
}

/** PUT `unpause`. */
export async function unpauseVmi(t: VmiTarget, options: PauseOptions): Promise<void> {
  const vm = await getVm(t);
  if (vm?.status?.snapshotInProgress !== undefined) {
    throw conflict(VM, t.name, "VM snapshot is in progress");
  }
  const vmi = await fetchVmi(t);
  refuse(validateUnpause(vmi));
  if (options.dryRun?.[0] === "All") return;
  await internalOnFailure(() => t.handler.put(vmi, "unpause", options));
}

/** Unpause preconditions: Running and paused. */
export function validateUnpause(vmi: VirtualMachineInstance): ApiError | undefined {
  const name = vmi.metadata?.name ?? "";
  if (vmi.status?.phase !== "Running") return conflict(VMI, name, "VMI is not running");
  if (findCondition(vmi.status.conditions, "Paused") === undefined) return conflict(VMI, name, "VMI is not paused");
  return undefined;
}

/** PUT `softreboot`. */
export async function softRebootVmi(t: VmiTarget): Promise<void> {
  const vmi = await fetchVmi(t);
  refuse(validateSoftReboot(vmi));
  await internalOnFailure(() => t.handler.put(vmi, "softreboot"));
}

/** Soft-reboot preconditions: Running, not paused, and an agent or ACPI to deliver the request. */
export function validateSoftReboot(vmi: VirtualMachineInstance): ApiError | undefined {
  const name = vmi.metadata?.name ?? "";
  if (vmi.status?.phase !== "Running") return conflict(VMI, name, VM_NOT_RUNNING);
  if (hasCondition(vmi.status.conditions, "Paused")) return conflict(VMI, name, "VMI is paused");
  const acpiDisabled = vmi.spec.domain?.features?.acpi?.enabled === false;
  if (findCondition(vmi.status.conditions, "AgentConnected") === undefined && acpiDisabled) {
    return conflict(VMI, name, "VMI neither have the agent connected nor the ACPI feature enabled");
  }
  return undefined;
}

/** GET `guestosinfo`: the guest agent's OS information, as virt-handler reports it. */
export async function guestOsInfo(t: VmiTarget): Promise<unknown> {
  const vmi = await fetchVmi(t);
  if (vmi.status?.phase !== "Running") throw conflict(VMI, t.name, "VMI is not running");
  if (findCondition(vmi.status.conditions, "AgentConnected") === undefined) {
    throw conflict(VMI, t.name, "VMI does not have guest agent connected");
  }
  return await internalOnFailure(() => t.handler.get(vmi, "guestosinfo"));
}

/** Console preconditions (`validateVMIForConsole`): a serial console exists, not Failed, Running. */
export function validateConsole(vmi: VirtualMachineInstance): ApiError | undefined {
  if (vmi.spec.domain?.devices?.autoattachSerialConsole === false) return badRequest("No serial consoles are present.");
  if (vmi.status?.phase === "Failed") return conflict(VMI, vmi.metadata?.name ?? "", "VMI is in failed status");
  if (vmi.status?.phase !== "Running") return badRequest("VMI is not running");
  return undefined;
}
