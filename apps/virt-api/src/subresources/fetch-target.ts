/**
 * The prologue every subresource handler shares: read the VM or VMI the call is about as the caller, and turn a
 * failure into the Status KubeVirt's virt-api answers (`rest/lifecycle.go` `fetchVirtualMachine`,
 * `FetchVirtualMachineInstance`, `FetchVirtualMachineInstanceForVM`):
 *
 *   read fails            -> 500 `unable to retrieve vm|vmi [NAME]: <why>`
 *   absent                -> 404 `virtualmachine[instance].kubevirt.io "NAME" not found` (KubeVirt's singular)
 *   a later call fails    -> 500 `<why>` ({@link internalOnFailure}: handler calls, VMI patches, VMIM creates)
 */
import type { VirtualMachine, VirtualMachineInstance } from "@kvt/api";
import { conflict, errorMessage, type GroupResource, internalError, notFound } from "@kvt/kube";
import type { ClusterClient } from "../kube/cluster-client.ts";

/** The VM, as KubeVirt's subresource errors name it (singular). */
export const VM: GroupResource = { group: "kubevirt.io", resource: "virtualmachine" };
/** The VMI, as KubeVirt's subresource errors name it (singular). */
export const VMI: GroupResource = { group: "kubevirt.io", resource: "virtualmachineinstance" };

/** Runs `fn`; any failure becomes a 500 with its message (KubeVirt's `errors.NewInternalError(err)`). */
export async function internalOnFailure<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    throw internalError(errorMessage(error));
  }
}

/** The object a subresource call is about, and the client that reads it as the caller. */
export interface SubresourceTarget {
  /** Acts as the caller: every read, and the writes the caller asked for. */
  readonly client: ClusterClient;
  readonly namespace: string;
  readonly name: string;
}

/** Reads as the caller; a failed read is a 500 `unable to retrieve <what> [NAME]: <why>`. */
async function retrieve<T>(what: "vm" | "vmi", name: string, read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (error) {
    throw internalError(`unable to retrieve ${what} [${name}]: ${errorMessage(error)}`);
  }
}

/** The VM as the caller sees it, or undefined when there is none; a failed read is a 500. */
export function getVm(t: SubresourceTarget): Promise<VirtualMachine | undefined> {
  return retrieve("vm", t.name, () => t.client.getVm(t.namespace, t.name));
}

/** `fetchVirtualMachine`: the VM, 404 as `virtualmachine.kubevirt.io "x" not found`. */
export async function fetchVm(t: SubresourceTarget): Promise<VirtualMachine> {
  const vm = await getVm(t);
  if (!vm) throw notFound(VM, t.name);
  return vm;
}

/** `FetchVirtualMachineInstance`: the VMI, 404 as `virtualmachineinstance.kubevirt.io "x" not found`. */
export async function fetchVmi(t: SubresourceTarget): Promise<VirtualMachineInstance> {
  const vmi = await retrieve("vmi", t.name, () => t.client.getVmi(t.namespace, t.name));
  if (!vmi) throw notFound(VMI, t.name);
  return vmi;
}

/** `FetchVirtualMachineInstanceForVM`: the VMI of a started VM, owned by it. */
export async function fetchVmiForVm(t: SubresourceTarget): Promise<VirtualMachineInstance> {
  const vm = await fetchVm(t);
  if (vm.status?.created !== true) throw conflict(VM, t.name, "VMI is not started");
  const vmi = await fetchVmi(t);
  const uid = vm.metadata?.uid;
  if (!uid || !vmi.metadata?.ownerReferences?.some((ref) => ref.uid === uid)) {
    throw internalError(`unable to retrieve vmi [${t.name}] for vm: it is not owned by the VM`);
  }
  return vmi;
}
