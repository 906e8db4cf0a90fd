/**
 * What this host's KVM is: none, a hardware-assisted one (VT-x/SVM, which runs any guest, a stock Linux kernel
 * included), or PVM (the kvm_pvm module: software virtualization that emulates guest ring 0; it runs the PVM-safe test
 * guest, not a stock Linux kernel). Virt-launcher picks its backend from it, and the test and bench lanes pick where
 * our VMM's Linux-guest checks run (here, or inside the nested lane's L1).
 */
import { existsSync, readFileSync } from "node:fs";

/** Facts about this host's virtualization (see {@link probeHostVirt}). */
export interface HostVirt {
  /** /dev/kvm exists. */
  readonly kvmDevice: boolean;
  /** The CPU advertises VT-x (vmx) or AMD-V (svm). */
  readonly hardwareVirt: boolean;
  /** /dev/kvm is PVM (the kvm_pvm module), i.e. software virtualization. */
  readonly pvm: boolean;
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

/** True when this host's KVM can run a stock Linux guest (a KVM device that is not PVM, or PVM on a VT-x/SVM CPU). */
export function kvmRunsLinux(host: HostVirt = probeHostVirt()): boolean {
  return host.kvmDevice && (host.hardwareVirt || !host.pvm);
}

/** The lane a bench or check runs in: inside the nested lane's L1 (tools/nested sets KVT_NESTED_L1 there) or here. */
export type BenchLane = "nested" | "host";

/** {@link BenchLane} of this process, from the environment tools/nested gives its L1 jobs. */
export function benchLane(env: NodeJS.ProcessEnv = process.env): BenchLane {
  return env.KVT_NESTED_L1 !== undefined && env.KVT_NESTED_L1 !== "" ? "nested" : "host";
}
