import { describe, expect, it } from "vitest";
import type { VirtualMachineInstanceSpec } from "../types.ts";
import { checkPreferenceRequirements } from "./instancetype-requirements.ts";
import type { InstancetypeSpec, PreferenceSpec } from "./instancetype-types.ts";

const cirros: PreferenceSpec = { requirements: { cpu: { guest: 1 }, memory: { guest: "256Mi" } } };
const spec = (cpu: Record<string, number> | undefined, guest?: string): VirtualMachineInstanceSpec => ({
  domain: { devices: {}, ...(cpu ? { cpu } : {}), ...(guest ? { memory: { guest } } : {}) },
});
const it1 = (guest: number, memory: string): InstancetypeSpec => ({ cpu: { guest }, memory: { guest: memory } });

describe("checkPreferenceRequirements(): KubeVirt pkg/instancetype/preference/requirements", () => {
  it.each<
    [string, InstancetypeSpec | undefined, PreferenceSpec, VirtualMachineInstanceSpec, string | undefined, string[]?]
  >([
    ["met by the instancetype", it1(1, "512Mi"), cirros, spec(undefined), undefined],
    [
      "checkCPU: instancetype too small",
      it1(1, "1Gi"),
      { requirements: { cpu: { guest: 2 } } },
      spec(undefined),
      "insufficient CPU resources of 1 vCPU provided by instance type, preference requires 2 vCPU",
      ["spec.instancetype"],
    ],
    [
      "checkMemory: instancetype too small",
      it1(1, "128Mi"),
      cirros,
      spec(undefined),
      "insufficient Memory resources of 128Mi provided by instance type, preference requires 256Mi",
      ["spec.instancetype"],
    ],
    [
      "checkCPU: VM sockets too few",
      undefined,
      { requirements: { cpu: { guest: 2 } } },
      spec({ sockets: 1, cores: 1, threads: 1 }),
      "insufficient CPU resources of 1 vCPU provided by VirtualMachine, preference requires 2 vCPU provided as sockets",
      ["spec.template.spec.domain.cpu.sockets"],
    ],
    [
      "checkCPU: no CPU on the VM",
      undefined,
      { requirements: { cpu: { guest: 2 } } },
      spec(undefined),
      "no CPU resources provided by VirtualMachine, preference requires 2 vCPU",
      ["spec.template.spec.domain.cpu"],
    ],
    [
      "checkMemory: VM memory too small",
      undefined,
      { requirements: { memory: { guest: "1Gi" } } },
      spec({ sockets: 1 }, "512Mi"),
      "insufficient Memory resources of 512Mi provided by VirtualMachine, preference requires 1Gi",
      ["spec.template.spec.domain.memory"],
    ],
  ])("%s", (_rule, it, pref, vmi, message, fields) => {
    const failure = checkPreferenceRequirements(it, pref, vmi);
    expect(failure?.message).toBe(message);
    if (fields) expect(failure?.fields).toEqual(fields);
  });
});
