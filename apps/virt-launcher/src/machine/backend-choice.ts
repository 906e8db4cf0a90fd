/**
 * Which machine backend runs a VMI, and why (KubeVirt's `useEmulation`). Pure decision + a small host probe.
 *
 *   useEmulation   host KVM can run the guest?          -> backend   SoftwareEmulation condition
 *   never          yes                                   -> native    -
 *   never          no                                    -> (fails: cannot run anywhere, reason says why)
 *   whenNeeded     yes                                   -> native    -
 *   whenNeeded     no                                    -> qemu      True, reason KVMUnavailable | KVMCannotRunGuest
 *   always         (any)                                 -> qemu      True, reason EmulationRequested
 *
 * "Host KVM can run the guest" = /dev/kvm exists and (the CPU shows VT-x/SVM, or KVM is not PVM, or the guest is
 * PVM-safe). A PVM KVM (the kvm_pvm module: software virtualization) emulates guest ring-0, which a stock Linux
 * kernel cannot survive; the PVM-safe test guest runs there fine.
 */
import { existsSync, readFileSync } from "node:fs";
import type { MachineBackend } from "./machine.ts";

/** The cluster setting: never emulate, emulate when KVM cannot run the guest (local default), or always emulate. */
export type UseEmulation = "never" | "whenNeeded" | "always";

/** Facts about this host's virtualization (see {@link probeHostVirt}). */
export interface HostVirt {
  /** /dev/kvm exists. */
  readonly kvmDevice: boolean;
  /** The CPU advertises VT-x (vmx) or AMD-V (svm). */
  readonly hardwareVirt: boolean;
  /** /dev/kvm is PVM (the kvm_pvm module), i.e. software virtualization. */
  readonly pvm: boolean;
}

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
  guest: { readonly pvmSafe: boolean },
): BackendChoice {
  if (setting === "always") {
    return {
      ok: true,
      backend: "qemu",
      emulation: { reason: "EmulationRequested", message: "useEmulation is always: software emulation (QEMU TCG)" },
    };
  }
  const blocker = kvmBlocker(host, guest.pvmSafe);
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

/** Where {@link probeHostVirt} looks; tests point these at fixtures. */
export interface HostVirtPaths {
  readonly kvm: string;
  readonly cpuinfo: string;
  readonly sysModule: string;
  readonly procModules: string;
}

const DEFAULT_PATHS: HostVirtPaths = {
  kvm: "/dev/kvm",
  cpuinfo: "/proc/cpuinfo",
  sysModule: "/sys/module",
  procModules: "/proc/modules",
};

function readOr(path: string, fallback: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return fallback;
  }
}

/**
 * Probes the host: /dev/kvm, the cpuinfo `flags` for vmx/svm, and PVM by the kvm_pvm module (listed in
 * /sys/module even when built in with parameters, or in /proc/modules when loadable).
 */
export function probeHostVirt(paths: HostVirtPaths = DEFAULT_PATHS): HostVirt {
  const flags = readOr(paths.cpuinfo, "")
    .split("\n")
    .filter((l) => /^flags\s*:/.test(l))
    .flatMap((l) =>
      l
        .slice(l.indexOf(":") + 1)
        .trim()
        .split(/\s+/),
    );
  const modules = readOr(paths.procModules, "");
  return {
    kvmDevice: existsSync(paths.kvm),
    hardwareVirt: flags.includes("vmx") || flags.includes("svm"),
    pvm: existsSync(`${paths.sysModule}/kvm_pvm`) || /^kvm_pvm\s/m.test(modules),
  };
}
