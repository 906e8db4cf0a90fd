/* eslint-disable @typescript-eslint/restrict-template-expressions -- FieldPath prints itself (toString). */
/**
 * Hardware this platform cannot give a guest. The schema knows every KubeVirt field (nothing a KubeVirt manifest
 * carries is refused as unknown), but a VMI asking for a device neither machine backend provides (our native VMM,
 * QEMU in TCG mode) is refused at admission with the field and the reason, as KubeVirt refuses hardware its
 * architecture or node cannot provide, instead of starting without the device.
 *
 *   spec.domain.devices.{gpus,hostDevices}     no PCI passthrough or mediated devices (no VFIO)
 *   spec.domain.devices.tpm                    no emulated TPM (no swtpm)
 *   spec.domain.devices.{filesystems,sound,watchdog,panicDevices,clientPassthrough}   no such device model
 *   spec.domain.launchSecurity                 no SEV/SNP/TDX confidential guests
 *   spec.domain.cpu.{realtime,numa,isolateEmulatorThread}   no host CPU pinning or NUMA passthrough
 *   spec.domain.cpu.dedicatedCpuPlacement      no vCPU pinning to the pod's exclusive CPUs
 *   spec.domain.memory.hugepages               no hugepage-backed guest memory (both backends map anonymous memory)
 *
 * A VM whose instancetype supplies one of these (the common cx1 and m1 series) is refused the same way: the VM
 * webhook validates the template with the instancetype applied, and the message names the instancetype.
 */
import type { ValidationCause, VirtualMachineInstanceSpec } from "../types.ts";
import { CAUSE_TYPE, cause, type FieldPath } from "./causes.ts";

const BACKENDS = "this platform's machine backends (native VMM, QEMU TCG)";

function present(v: unknown): boolean {
  if (v === undefined || v === null || v === false) return false;
  return !Array.isArray(v) || v.length > 0;
}

/** One cause per requested device or CPU feature no backend provides. */
export function validateUnsupportedHardware(field: FieldPath, spec: VirtualMachineInstanceSpec): ValidationCause[] {
  const devices = spec.domain.devices;
  const cpu = spec.domain.cpu;
  const tpm = devices.tpm;
  const checks: [unknown, FieldPath, string][] = [
    [devices.gpus, field.child("domain", "devices", "gpus"), "GPU passthrough or vGPUs (no VFIO)"],
    [devices.hostDevices, field.child("domain", "devices", "hostDevices"), "host device passthrough (no VFIO)"],
    // `tpm: {enabled: false}` asks for no TPM, as on KubeVirt.
    [tpm && tpm.enabled !== false ? tpm : undefined, field.child("domain", "devices", "tpm"), "an emulated TPM"],
    [devices.filesystems, field.child("domain", "devices", "filesystems"), "virtiofs filesystems"],
    [devices.sound, field.child("domain", "devices", "sound"), "a sound device"],
    [devices.watchdog, field.child("domain", "devices", "watchdog"), "a watchdog device"],
    [devices.panicDevices, field.child("domain", "devices", "panicDevices"), "panic devices"],
    [devices.clientPassthrough, field.child("domain", "devices", "clientPassthrough"), "USB redirection"],
    [spec.domain.launchSecurity, field.child("domain", "launchSecurity"), "confidential guests (SEV, SNP, TDX)"],
    [cpu?.realtime, field.child("domain", "cpu", "realtime"), "realtime vCPU scheduling"],
    [cpu?.numa, field.child("domain", "cpu", "numa"), "guest NUMA passthrough"],
    [cpu?.isolateEmulatorThread, field.child("domain", "cpu", "isolateEmulatorThread"), "emulator-thread pinning"],
    [cpu?.dedicatedCpuPlacement, field.child("domain", "cpu", "dedicatedCpuPlacement"), "dedicated CPU placement"],
    [spec.domain.memory?.hugepages, field.child("domain", "memory", "hugepages"), "hugepage-backed guest memory"],
  ];
  return checks
    .filter(([value]) => present(value))
    .map(([, f, what]) => cause(CAUSE_TYPE.notSupported, `${f} is not supported: ${BACKENDS} provide no ${what}`, f));
}
