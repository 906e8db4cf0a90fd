/**
 * The VMI grace-period patch virt-api writes before a stop with a grace period or a force restart (KubeVirt
 * `patchVMITerminationGracePeriod`), guarded by a `test` of the value it read. (The VM spec/status patches come
 * from @kvt/api's lifecycle plans.) Pure.
 *
 * For a missing member it uses `add` without a `test`: RFC 6902 fails a `test` on a missing path.
 */
import type { JsonPatchOp, VirtualMachineInstance } from "@kvt/api";

/** `patchVMITerminationGracePeriod`: sets the VMI's grace period, guarded by a `test` on the old value. */
export function gracePeriodPatch(vmi: VirtualMachineInstance, gracePeriod: number): JsonPatchOp[] {
  const old = vmi.spec.terminationGracePeriodSeconds;
  if (old === undefined) return [{ op: "add", path: "/spec/terminationGracePeriodSeconds", value: gracePeriod }];
  return [
    { op: "test", path: "/spec/terminationGracePeriodSeconds", value: old },
    { op: "replace", path: "/spec/terminationGracePeriodSeconds", value: gracePeriod },
  ];
}
