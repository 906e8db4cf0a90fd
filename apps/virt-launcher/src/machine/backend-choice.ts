/**
 * Which machine backend runs a VMI, and why (KubeVirt's `useEmulation`). Pure decision + a small host probe.
 *
 *   useEmulation   host KVM can run the guest?          -> backend   SoftwareEmulation condition
 *   never          yes                                   -> native    -
 *   never          no                                    -> (fails: cannot run anywhere, reason says why)
 *   whenNeeded     yes                                   -> native    -
 *   whenNeeded     no                                    -> qemu      True, reason KVMUnavailable | KVMCannotRunGuest
 *   always         (any)                                 -> qemu      True, reason EmulationRequested
 *   never          a device only QEMU has (sata disk)    -> (fails: the reason names the device)
 *   whenNeeded     a device only QEMU has                -> qemu      True, reason DeviceNeedsEmulation
 *
 * "Host KVM can run the guest" = /dev/kvm exists and (the CPU shows VT-x/SVM, or KVM is not PVM, or the guest is
 * PVM-safe). A PVM KVM (the kvm_pvm module: software virtualization) emulates guest ring-0, which a stock Linux
 * kernel cannot survive; the PVM-safe test guest runs there fine.
 */
import type { HostVirt } from "@kvt/vmm";
import type { MachineBackend } from "./machine.ts";

/** The cluster setting: never emulate, emulate when KVM cannot run the guest (local default), or always emulate. */
export type UseEmulation = "never" | "whenNeeded" | "always";

/** The condition type an emulated VMI carries. */
export const SOFTWARE_EMULATION_CONDITION = "SoftwareEmulation";

/** The outcome of {@link chooseBackend}. */
export type BackendChoice =
  | {
      readonly ok: true;
      readonly backend: MachineBackend;
      /** For an emulated VMI: the SoftwareEmulation condition's reason and message. */
      readonly emulation?: { readonly reason: string; readonly message: string };
    }
  | { readonly ok: false; readonly reason: string; readonly message: string };

/**
 * Reads a `useEmulation` value: our three names, or KubeVirt's boolean
 * (`developerConfiguration.useEmulation: true` allows emulation as a fallback = whenNeeded; false = never).
 * Undefined means the local-cluster default, whenNeeded.
 */
export function parseUseEmulation(value: unknown): UseEmulation {
  if (value === undefined || value === null) return "whenNeeded";
  if (value === true) return "whenNeeded";
  if (value === false) return "never";
  if (value === "never" || value === "whenNeeded" || value === "always") return value;
  throw new Error(`invalid useEmulation ${JSON.stringify(value)}: expected never, whenNeeded, always or a boolean`);
}

/** Why KVM cannot run this guest, or undefined when it can. */
function kvmBlocker(host: HostVirt, pvmSafe: boolean): { reason: string; message: string } | undefined {
  if (!host.kvmDevice) return { reason: "KVMUnavailable", message: "/dev/kvm does not exist on this node" };
  if (host.hardwareVirt || !host.pvm || pvmSafe) return undefined;
  return {
    reason: "KVMCannotRunGuest",
    message: "this node's KVM is PVM (software virtualization, no VT-x/SVM) and the guest is not PVM-safe",
  };
}

/** Decides the backend for a guest on a host under a setting. Pure. */
export function chooseBackend(
  setting: UseEmulation,
  host: HostVirt,
  guest: { readonly pvmSafe: boolean; readonly needsQemu?: string },
): BackendChoice {
  if (setting === "always") {
    return {
      ok: true,
      backend: "qemu",
      emulation: { reason: "EmulationRequested", message: "useEmulation is always: software emulation (QEMU TCG)" },
    };
  }
  const blocker = guest.needsQemu
    ? { reason: "DeviceNeedsEmulation", message: guest.needsQemu }
    : kvmBlocker(host, guest.pvmSafe);
  if (!blocker) return { ok: true, backend: "native" };
  if (setting === "never") {
    return {
      ok: false,
      reason: "NoVirtualizationAvailable",
      message: `${blocker.message}, and useEmulation is never: the VMI cannot run here`,
    };
  }
  return {
    ok: true,
    backend: "qemu",
    emulation: { reason: blocker.reason, message: `${blocker.message}: software emulation (QEMU TCG)` },
  };
}

/** A VMI status condition (the shape of kubevirt.io/v1 VirtualMachineInstanceCondition that we fill). */
export interface EmulationCondition {
  readonly type: typeof SOFTWARE_EMULATION_CONDITION;
  readonly status: "True";
  readonly reason: string;
  readonly message: string;
}

/** The SoftwareEmulation condition an emulated VMI carries, or undefined for a VMI on KVM or one that failed. */
export function emulationCondition(choice: BackendChoice): EmulationCondition | undefined {
  if (!choice.ok || !choice.emulation) return undefined;
  return {
    type: SOFTWARE_EMULATION_CONDITION,
    status: "True",
    reason: choice.emulation.reason,
    message: choice.emulation.message,
  };
}
