/* eslint-disable @typescript-eslint/restrict-template-expressions -- FieldPath prints itself (toString). */
/**
 * What virt-api refuses while the feature gate behind it is off (KubeVirt `vmi-create-admitter.go`), with KubeVirt's
 * messages and fields:
 *
 *   metadata.annotations[hooks.kubevirt.io/hookSidecars]   Sidecar                      (alpha)
 *   metadata.annotations[kubevirt.io/ignitiondata]         ExperimentalIgnitionSupport  (alpha)
 *   spec.volumes[i].hostDisk                               HostDisk                     (alpha)
 *   spec.volumes[i].downwardMetrics, devices.downwardMetrics   DownwardMetrics          (alpha)
 *   spec.domain.devices.hostDevices                        HostDevices                  (alpha)
 *   spec.domain.devices.autoattachVSOCK: true              VSOCK                        (alpha)
 *   spec.domain.memory.reservedOverhead                    ReservedOverheadMemlock      (alpha)
 *   spec.domain.rebootPolicy                               RebootPolicy                 (beta: on by default)
 *   interfaces[].passt / macvtap with the discontinued Passt / Macvtap gate listed   refused (VMI create)
 */
import { featureGateEnabled, GATE, retiredGateMessage } from "../semantics/feature-gates.ts";
import type { DeveloperConfiguration, ObjectMeta, ValidationCause, VirtualMachineInstanceSpec } from "../types.ts";
import { CAUSE_TYPE, cause, type FieldPath } from "./causes.ts";

/** The annotation that lists hook sidecars (KubeVirt `hooks.HookSidecarListAnnotationName`). */
export const HOOK_SIDECARS_ANNOTATION = "hooks.kubevirt.io/hookSidecars";
/** The annotation carrying Ignition data (KubeVirt `v1.IgnitionAnnotation`). */
export const IGNITION_ANNOTATION = "kubevirt.io/ignitiondata";

/** Gated annotations of a VMI (or a VM template) at `field` (`metadata` / `spec.template.metadata`). */
export function validateGatedMetadata(
  field: FieldPath,
  meta: ObjectMeta | undefined,
  dev: DeveloperConfiguration | undefined,
): ValidationCause[] {
  const annotations = meta?.annotations ?? {};
  const causes: ValidationCause[] = [];
  const at = field.child("annotations");
  if (annotations[IGNITION_ANNOTATION] && !featureGateEnabled(GATE.ignition, dev)) {
    const entry = at.child(IGNITION_ANNOTATION);
    const message = `ExperimentalIgnitionSupport feature gate is not enabled in kubevirt-config, invalid entry ${entry}`;
    causes.push(cause(CAUSE_TYPE.invalid, message, at));
  }
  if (annotations[HOOK_SIDECARS_ANNOTATION] && !featureGateEnabled(GATE.sidecar, dev)) {
    const entry = at.child(HOOK_SIDECARS_ANNOTATION);
    causes.push(
      cause(CAUSE_TYPE.invalid, `sidecar feature gate is not enabled in kubevirt-config, invalid entry ${entry}`, at),
    );
  }
  return causes;
}

/** Gated parts of a VMI spec (or a VM template's spec) at `field`. */
export function validateGatedSpec(
  field: FieldPath,
  spec: VirtualMachineInstanceSpec,
  dev: DeveloperConfiguration | undefined,
): ValidationCause[] {
  const on = (gate: string) => featureGateEnabled(gate, dev);
  const causes: ValidationCause[] = [];
  const devices = spec.domain.devices;
  if (devices.downwardMetrics && !on(GATE.downwardMetrics)) {
    causes.push(
      cause(
        CAUSE_TYPE.invalid,
        "downwardMetrics virtio serial is not allowed: DownwardMetrics feature gate is not enabled",
        field.child("domain", "devices", "downwardMetrics"),
      ),
    );
  }
  if (devices.hostDevices && !on(GATE.hostDevices)) {
    // KubeVirt names the field by its Go name here.
    causes.push(
      cause(
        CAUSE_TYPE.invalid,
        "Host Devices feature gate is not enabled in kubevirt-config",
        field.child("HostDevices"),
      ),
    );
  }
  if (devices.autoattachVSOCK === true && !on(GATE.vsock)) {
    causes.push(
      cause(
        CAUSE_TYPE.invalid,
        "VSOCK feature gate is not enabled in kubevirt-config",
        field.child("domain", "devices", "autoattachVSOCK"),
      ),
    );
  }
  if (spec.domain.rebootPolicy !== undefined && !on(GATE.rebootPolicy)) {
    causes.push(
      cause(
        CAUSE_TYPE.invalid,
        "RebootPolicy is specified but the RebootPolicy feature gate is not enabled",
        field.child("domain", "rebootPolicy"),
      ),
    );
  }
  if (spec.domain.memory?.reservedOverhead && !on(GATE.reservedOverheadMemlock)) {
    causes.push(
      cause(
        CAUSE_TYPE.invalid,
        "Reserved overhead memlock feature gate is not enabled in kubevirt-config",
        field.child("domain", "memory", "reservedOverhead"),
      ),
    );
  }
  (spec.volumes ?? []).forEach((volume, i) => {
    const at = field.child("volumes").index(i);
    if (volume.downwardMetrics && !on(GATE.downwardMetrics)) {
      const message = "downwardMetrics disks are not allowed: DownwardMetrics feature gate is not enabled.";
      causes.push(cause(CAUSE_TYPE.invalid, message, at));
    }
    if (volume.hostDisk && !on(GATE.hostDisk)) {
      causes.push(cause(CAUSE_TYPE.invalid, "HostDisk feature gate is not enabled", at));
    }
  });
  return causes;
}

/**
 * KubeVirt's `ValidateFeatureGates` (VMI create): a discontinued gate still listed in the CR while the VMI uses the
 * API it gated (an interface with `passt: {}` or `macvtap: {}`) refuses the VMI with the gate's message.
 */
export function validateDiscontinuedGates(
  spec: VirtualMachineInstanceSpec | undefined,
  dev: DeveloperConfiguration | undefined,
): ValidationCause[] {
  const listed = dev?.featureGates ?? [];
  const interfaces = spec?.domain?.devices?.interfaces ?? [];
  const used: Record<string, boolean> = {
    [GATE.passt]: interfaces.some((i) => i.passt !== undefined),
    [GATE.macvtap]: interfaces.some((i) => i.macvtap !== undefined),
  };
  return listed
    .filter((gate) => used[gate])
    .map((gate) => ({ type: CAUSE_TYPE.notSupported, message: retiredGateMessage(gate) ?? gate, field: "" }));
}
