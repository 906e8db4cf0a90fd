import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { defaultVm } from "../defaults/vm-defaults.ts";
import { defaultVmi } from "../defaults/vmi-defaults.ts";
import { decodeStrict } from "../strict-decode.ts";
import type { VirtualMachine, VirtualMachineInstance } from "../types.ts";
import { validateVm } from "../validation/vm-validation.ts";
import { validateVmiCreate } from "../validation/vmi-validation.ts";

const manifest = readFileSync(new URL("./vm-cirros.yaml", import.meta.url), "utf8");

describe("the user guide's vm-cirros", () => {
  const raw = parse(manifest) as unknown;

  it("decodes strictly", () => {
    expect(decodeStrict("VirtualMachine", raw)).toEqual({ unknownFields: [], causes: [] });
  });

  it("defaults (machine type, firmware uuid and serial) and validates", () => {
    const vm = defaultVm(raw as VirtualMachine, "CREATE", { uuid: () => "6a1a24a1-0000-4000-8000-000000000001" });
    expect(vm.spec.template?.spec?.domain.machine).toEqual({ type: "q35" });
    expect(vm.spec.template?.spec?.domain.firmware).toEqual({
      uuid: "6a1a24a1-0000-4000-8000-000000000001",
      serial: "6a1a24a1-0000-4000-8000-000000000001",
    });
    expect(validateVm(vm)).toEqual([]);
  });

  it("the VMI it creates defaults and validates, keeping the VM's UUID", () => {
    const vm = defaultVm(raw as VirtualMachine, "CREATE", { uuid: () => "6a1a24a1-0000-4000-8000-000000000002" });
    const vmi: VirtualMachineInstance = {
      apiVersion: "kubevirt.io/v1",
      kind: "VirtualMachineInstance",
      metadata: { name: "vm-cirros", namespace: "default", labels: vm.spec.template?.metadata?.labels ?? {} },
      spec: structuredClone(vm.spec.template?.spec ?? { domain: { devices: {} } }),
    };
    const d = defaultVmi(vmi, { uuid: () => "must-not-be-used" });
    expect(d.spec.domain.firmware?.uuid).toBe("6a1a24a1-0000-4000-8000-000000000002");
    expect(d.spec.domain.memory?.guest).toBe("64M");
    expect(d.spec.terminationGracePeriodSeconds).toBe(0);
    expect(d.spec.domain.devices.interfaces).toEqual([{ name: "default", bridge: {} }]);
    expect(validateVmiCreate(d)).toEqual([]);
  });

  it("the same manifest with an unknown field is refused by strict decoding", () => {
    const bad = parse(manifest.replace("running: false", "running: false\n  runing: true")) as unknown;
    expect(decodeStrict("VirtualMachine", bad).unknownFields).toEqual(["spec.runing"]);
  });
});
