import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { benchLane, type HostVirt, kvmRunsLinux, probeHostVirt } from "./host-virt.ts";

describe("probeHostVirt()", () => {
  it.each([
    [
      "PVM host",
      "flags\t\t: fpu sse2 hypervisor\n",
      ["kvm_pvm"],
      "",
      { kvmDevice: true, hardwareVirt: false, pvm: true },
    ],
    [
      "PVM as a loadable module",
      "flags : fpu\n",
      [],
      "kvm_pvm 1234 0 - Live 0x0\n",
      { kvmDevice: true, hardwareVirt: false, pvm: true },
    ],
    ["AMD-V host", "flags\t\t: fpu svm npt\n", ["kvm_amd"], "", { kvmDevice: true, hardwareVirt: true, pvm: false }],
  ])("%s", (_name, cpuinfo, modules, procModules, want) => {
    const dir = mkdtempSync(join(tmpdir(), "kvt-virt-"));
    try {
      writeFileSync(join(dir, "kvm"), "");
      writeFileSync(join(dir, "cpuinfo"), cpuinfo);
      writeFileSync(join(dir, "modules"), procModules);
      for (const m of modules) mkdirSync(join(dir, "sys", m), { recursive: true });
      const paths = {
        kvm: join(dir, "kvm"),
        cpuinfo: join(dir, "cpuinfo"),
        sysModule: join(dir, "sys"),
        procModules: join(dir, "modules"),
      };
      expect(probeHostVirt(paths)).toEqual(want);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("kvmRunsLinux()", () => {
  it.each<[string, HostVirt, boolean]>([
    ["hardware KVM", { kvmDevice: true, hardwareVirt: true, pvm: false }, true],
    ["PVM on a CPU without VT-x/SVM", { kvmDevice: true, hardwareVirt: false, pvm: true }, false],
    ["PVM on a CPU with SVM", { kvmDevice: true, hardwareVirt: true, pvm: true }, true],
    ["a nested KVM whose CPU flags hide svm", { kvmDevice: true, hardwareVirt: false, pvm: false }, true],
    ["no /dev/kvm", { kvmDevice: false, hardwareVirt: true, pvm: false }, false],
  ])("%s: %s", (_name, host, runs) => {
    expect(kvmRunsLinux(host)).toBe(runs);
  });
});

describe("benchLane", () => {
  it("is nested inside the nested lane's L1 and host elsewhere", () => {
    expect(benchLane({ KVT_NESTED_L1: "1" })).toBe("nested");
    expect(benchLane({})).toBe("host");
    expect(benchLane({ KVT_NESTED_L1: "" })).toBe("host");
  });
});
