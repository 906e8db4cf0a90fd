/**
 * The VMI a VM creates (pure): the template's metadata and spec, the VM as controller owner, a stable firmware UUID
 * (the template's, else UUIDv5 of the VM name as KubeVirt's firmware controller derives it), and annotations that
 * record which VM generation and template the VMI was made from (RestartRequired compares them).
 */
import { createHash } from "node:crypto";
import {
  ANNOTATION,
  API_VERSION,
  KIND,
  LABEL,
  legacyFirmwareUuid,
  START_REQUEST_DATA_PAUSED_KEY,
  type VirtualMachine,
  type VirtualMachineInstance,
} from "@kvt/api";
import { traceparentOf } from "@kvt/observability";

/** Annotation (ours) with a hash of the template the VMI was created from. */
export const TEMPLATE_HASH_ANNOTATION = "kubevirt.io/vm-template-hash";

/** The firmware UUID the VM's VMIs get: the template's, else UUIDv5(name). Stable across restarts. */
export function firmwareUuid(vm: VirtualMachine): string {
  return vm.spec.template.spec?.domain?.firmware?.uuid ?? legacyFirmwareUuid(vm.metadata?.name ?? "");
}

/** Hashes by template object: cached VMs are never modified, so a template's hash is computed once per version. */
const hashes = new WeakMap<object, string>();

/** A short hash of the VM's template (metadata labels/annotations and spec). */
export function templateHash(vm: VirtualMachine): string {
  const t = vm.spec.template;
  let hash = hashes.get(t);
  if (hash === undefined) {
    const json = JSON.stringify({ l: t.metadata?.labels ?? {}, a: t.metadata?.annotations ?? {}, s: t.spec });
    hash = createHash("sha256").update(json).digest("hex").slice(0, 16);
    hashes.set(t, hash);
  }
  return hash;
}

/** The VMI to create for `vm`. */
export function vmiFromVm(vm: VirtualMachine): VirtualMachineInstance {
  const t = structuredClone(vm.spec.template);
  const name = vm.metadata?.name ?? "";
  const spec = t.spec ?? { domain: { devices: {} } };
  spec.domain.firmware = { ...spec.domain.firmware, uuid: firmwareUuid(vm) };
  // `virtctl start --paused` arrives as a Start request with data.paused=true: the guest starts paused.
  const request = vm.status?.stateChangeRequests?.[0];
  if (request?.action === "Start" && request.data?.[START_REQUEST_DATA_PAUSED_KEY] === "true")
    spec.startStrategy = "Paused";
  // The VMI starts in the trace of the reconcile that creates it (the pod and the handlers follow it).
  const traceparent = traceparentOf();
  return {
    apiVersion: API_VERSION,
    kind: KIND.VirtualMachineInstance,
    metadata: {
      name,
      namespace: vm.metadata?.namespace,
      labels: { ...t.metadata?.labels, [LABEL.vm]: name },
      annotations: {
        ...t.metadata?.annotations,
        [ANNOTATION.vmGeneration]: String(vm.metadata?.generation ?? 1),
        [TEMPLATE_HASH_ANNOTATION]: templateHash(vm),
        ...(traceparent ? { [ANNOTATION.traceparent]: traceparent } : {}),
      },
      ownerReferences: [
        {
          apiVersion: API_VERSION,
          kind: KIND.VirtualMachine,
          name,
          uid: vm.metadata?.uid ?? "",
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    spec,
  };
}

/** True when the VM's template changed since `vmi` was created from it (the change waits for a restart). */
export function restartRequired(vm: VirtualMachine, vmi: VirtualMachineInstance): boolean {
  const recorded = vmi.metadata?.annotations?.[TEMPLATE_HASH_ANNOTATION];
  return recorded !== undefined && recorded !== templateHash(vm);
}
