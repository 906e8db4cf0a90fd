import { describe, expect, it } from "vitest";
import { vm } from "../testdata/objects.ts";
import type { VirtualMachineInstanceSpec } from "../types.ts";
import { validateVm } from "./vm-validation.ts";

const P = "spec.template.spec";
const BACKENDS = "this platform's machine backends (native VMM, QEMU TCG) provide no";

describe("hardware no machine backend provides is refused at admission (FieldValueNotSupported)", () => {
  it.each<[string, (s: VirtualMachineInstanceSpec) => unknown, string, string]>([
    [
      "a GPU",
      (s) => Object.assign(s.domain.devices, { gpus: [{ name: "g", deviceName: "nvidia.com/TU104GL" }] }),
      "domain.devices.gpus",
      "GPU passthrough or vGPUs (no VFIO)",
    ],
    [
      "a host device",
      (s) => Object.assign(s.domain.devices, { hostDevices: [{ name: "h", deviceName: "intel.com/qat" }] }),
      "domain.devices.hostDevices",
      "host device passthrough (no VFIO)",
    ],
    [
      "a TPM",
      (s) => {
        s.domain.devices.tpm = {};
      },
      "domain.devices.tpm",
      "an emulated TPM",
    ],
    [
      "a persistent TPM",
      (s) => Object.assign(s.domain.devices, { tpm: { persistent: true } }),
      "domain.devices.tpm",
      "an emulated TPM",
    ],
    [
      "virtiofs",
      (s) => Object.assign(s.domain.devices, { filesystems: [{ name: "f", virtiofs: {} }] }),
      "domain.devices.filesystems",
      "virtiofs filesystems",
    ],
    [
      "a sound card",
      (s) => Object.assign(s.domain.devices, { sound: { name: "audio", model: "ich9" } }),
      "domain.devices.sound",
      "a sound device",
    ],
    [
      "a watchdog",
      (s) => Object.assign(s.domain.devices, { watchdog: { name: "w", i6300esb: { action: "poweroff" } } }),
      "domain.devices.watchdog",
      "a watchdog device",
    ],
    [
      "a panic device",
      (s) => Object.assign(s.domain.devices, { panicDevices: [{ model: "isa" }] }),
      "domain.devices.panicDevices",
      "panic devices",
    ],
    [
      "USB redirection",
      (s) => Object.assign(s.domain.devices, { clientPassthrough: {} }),
      "domain.devices.clientPassthrough",
      "USB redirection",
    ],
    [
      "SEV",
      (s) => Object.assign(s.domain, { launchSecurity: { sev: {} } }),
      "domain.launchSecurity",
      "confidential guests (SEV, SNP, TDX)",
    ],
    [
      "realtime vCPUs",
      (s) => Object.assign(s.domain, { cpu: { realtime: {} } }),
      "domain.cpu.realtime",
      "realtime vCPU scheduling",
    ],
    [
      "NUMA passthrough",
      (s) => Object.assign(s.domain, { cpu: { numa: { guestMappingPassthrough: {} } } }),
      "domain.cpu.numa",
      "guest NUMA passthrough",
    ],
    [
      "an isolated emulator thread",
      (s) => Object.assign(s.domain, { cpu: { isolateEmulatorThread: true } }),
      "domain.cpu.isolateEmulatorThread",
      "emulator-thread pinning",
    ],
    [
      "dedicated CPUs",
      (s) => Object.assign(s.domain, { cpu: { dedicatedCpuPlacement: true } }),
      "domain.cpu.dedicatedCpuPlacement",
      "dedicated CPU placement",
    ],
    [
      "hugepages",
      (s) => Object.assign(s.domain, { memory: { guest: "1Gi", hugepages: { pageSize: "2Mi" } } }),
      "domain.memory.hugepages",
      "hugepage-backed guest memory",
    ],
  ])("%s", (_, mutate, field, what) => {
    const v = vm();
    const spec = v.spec.template.spec;
    if (!spec) throw new Error("the test VM has a template spec");
    mutate(spec);
    const causes = validateVm(v).filter((c) => c.type === "FieldValueNotSupported");
    expect(causes).toEqual([
      {
        type: "FieldValueNotSupported",
        message: `${P}.${field} is not supported: ${BACKENDS} ${what}`,
        field: `${P}.${field}`,
      },
    ]);
  });

  it.each<[string, (s: VirtualMachineInstanceSpec) => unknown]>([
    ["tpm disabled", (s) => Object.assign(s.domain.devices, { tpm: { enabled: false } })],
    ["empty GPU list", (s) => Object.assign(s.domain.devices, { gpus: [] })],
    ["isolateEmulatorThread false", (s) => Object.assign(s.domain, { cpu: { isolateEmulatorThread: false } })],
    ["dedicatedCpuPlacement false", (s) => Object.assign(s.domain, { cpu: { dedicatedCpuPlacement: false } })],
  ])("%s is accepted", (_, mutate) => {
    const v = vm();
    const spec = v.spec.template.spec;
    if (!spec) throw new Error("the test VM has a template spec");
    mutate(spec);
    expect(validateVm(v).filter((c) => c.type === "FieldValueNotSupported")).toEqual([]);
  });
});
