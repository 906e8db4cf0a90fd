import { describe, expect, it } from "vitest";
import { commonInstancetypes } from "./common-instancetypes.ts";
import type { VirtualMachineInstancetype, VirtualMachinePreference } from "./instancetype-types.ts";
import { validateInstancetype, validatePreference } from "./instancetype-validation.ts";

describe("commonInstancetypes(): the bundle the local cluster installs", () => {
  const bundle = commonInstancetypes();

  it("holds the u1 (10) and o1 (9) series and the linux and cirros preferences", () => {
    const names = bundle.map((o) => o.metadata.name);
    expect(names.filter((n) => n.startsWith("u1."))).toHaveLength(10);
    expect(names.filter((n) => n.startsWith("o1."))).toHaveLength(9);
    expect(names).toEqual(expect.arrayContaining(["u1.nano", "u1.8xlarge", "o1.nano", "linux", "cirros"]));
    expect(names).not.toContain("o1.2xmedium");
  });

  it.each([
    ["u1.medium", 1, "4Gi", undefined],
    ["u1.2xmedium", 2, "4Gi", undefined],
    ["u1.xlarge", 4, "16Gi", undefined],
    ["o1.large", 2, "8Gi", 50],
  ])("%s is %i vCPU / %s (overcommit %s)", (name, cpu, memory, overcommit) => {
    const o = bundle.find((x) => x.metadata.name === name) as unknown as VirtualMachineInstancetype;
    expect(o.spec).toEqual({
      cpu: { guest: cpu },
      memory: { guest: memory, ...(overcommit ? { overcommitPercent: overcommit } : {}) },
    });
    expect(o.metadata?.labels?.["instancetype.kubevirt.io/cpu"]).toBe(String(cpu));
  });

  it("every object passes its own kind's validation", () => {
    for (const o of bundle) {
      const result =
        o.kind === "VirtualMachineClusterInstancetype"
          ? validateInstancetype(o.kind, o as unknown as VirtualMachineInstancetype)
          : validatePreference(o.kind, o as unknown as VirtualMachinePreference);
      expect(result, o.metadata.name).toEqual({ causes: [], warnings: [] });
    }
  });
});
