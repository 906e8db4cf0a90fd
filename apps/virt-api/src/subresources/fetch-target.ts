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

/** The VM as the caller sees it, or undefined when there is none; a failed read is a 500. */
export async function getVm(
  client: ClusterClient,
  namespace: string,
  name: string,
): Promise<VirtualMachine | undefined> {
  try {
    return await client.getVm(namespace, name);
  } catch (error) {
    throw internalError(`unable to retrieve vm [${name}]: ${errorMessage(error)}`);
  }
}

/** `fetchVirtualMachine`: the VM, 404 as `virtualmachine.kubevirt.io "x" not found`. */
export async function fetchVm(client: ClusterClient, namespace: string, name: string): Promise<VirtualMachine> {
  const vm = await getVm(client, namespace, name);
  if (!vm) throw notFound(VM, name);
  return vm;
}

/** `FetchVirtualMachineInstance`: 404 as `virtualmachineinstance.kubevirt.io "x" not found`. */
export async function fetchVmi(
  client: ClusterClient,
  namespace: string,
  name: string,
): Promise<VirtualMachineInstance> {
  let vmi: VirtualMachineInstance | undefined;
  try {
    vmi = await client.getVmi(namespace, name);
  } catch (error) {
    throw internalError(`unable to retrieve vmi [${name}]: ${errorMessage(error)}`);
  }
  if (!vmi) throw notFound(VMI, name);
  return vmi;
}

/** `FetchVirtualMachineInstanceForVM`: the VMI of a started VM, owned by it. */
export async function fetchVmiForVm(
  client: ClusterClient,
  namespace: string,
  name: string,
): Promise<VirtualMachineInstance> {
  const vm = await fetchVm(client, namespace, name);
  if (vm.status?.created !== true) throw conflict(VM, name, "VMI is not started");
  const vmi = await fetchVmi(client, namespace, name);
  const uid = vm.metadata?.uid;
  if (!uid || !vmi.metadata?.ownerReferences?.some((ref) => ref.uid === uid)) {
    throw internalError(`unable to retrieve vmi [${name}] for vm: it is not owned by the VM`);
  }
  return vmi;
}
