import { describe, expect, it } from "vitest";
import { defaultMigration } from "./defaults/migration-defaults.ts";
import { defaultVm } from "./defaults/vm-defaults.ts";
import { defaultVmi } from "./defaults/vmi-defaults.ts";
import { printableStatus } from "./semantics/printable-status.ts";
import { planRestart, planStart, planStop } from "./semantics/vm-lifecycle.ts";
import { planVmRun } from "./semantics/vm-run-plan.ts";
import { decodeStrict } from "./strict-decode.ts";
import type { VirtualMachine, VirtualMachineInstance, VirtualMachineInstanceMigration } from "./types.ts";
import { admitMigrationCreate } from "./validation/migration-validation.ts";
import { validateVm } from "./validation/vm-validation.ts";
import { validateVmiCreate } from "./validation/vmi-validation.ts";

// Manifests a user (or a broken client) may send: every entry must be refused or handled, never throw.
const garbage: unknown[] = [
  null,
  42,
  "vm",
  [],
  {},
  { spec: null },
  { spec: "x" },
  { spec: { template: "x" } },
  { spec: { runStrategy: 7, template: { spec: { domain: [] } } } },
  { spec: { template: { spec: { domain: { devices: { disks: "all" } }, volumes: "x" } } } },
  { spec: { template: { spec: { domain: { devices: { disks: [null, 3] } }, volumes: [{}] } } } },
  { spec: { domain: { devices: { interfaces: [{ name: 5 }] } }, networks: {} } },
  { spec: { domain: { devices: {}, resources: { requests: { memory: {} } } } } },
  {
    spec: {
      domain: { devices: {}, resources: { requests: { memory: "1Gi" } } },
      volumes: [{ name: "v", cloudInitNoCloud: { userDataBase64: "%%%" } }],
    },
  },
  { metadata: { name: 5 }, spec: { vmiName: ["x"] } },
  { status: { phase: 3, stateChangeRequests: "x" }, spec: { runStrategy: "Always" } },
];

describe("nothing a manifest sends crashes the API library", () => {
  it.each(garbage.map((g) => [JSON.stringify(g), g]))("%s", (_s, g) => {
    expect(() => decodeStrict("VirtualMachine", g)).not.toThrow();
    expect(() => decodeStrict("VirtualMachineInstance", g)).not.toThrow();
    expect(Array.isArray(validateVm(g as VirtualMachine))).toBe(true);
    expect(Array.isArray(validateVmiCreate(g as VirtualMachineInstance))).toBe(true);
    expect(() =>
      admitMigrationCreate(g as VirtualMachineInstanceMigration, { vmi: undefined, migrationsOfVmi: [] }),
    ).not.toThrow();
    if (g !== null && typeof g === "object" && !Array.isArray(g)) {
      expect(() => defaultVm(g as VirtualMachine, "CREATE")).not.toThrow();
      expect(() => defaultVmi(g as VirtualMachineInstance)).not.toThrow();
      expect(() => defaultMigration(g as VirtualMachineInstanceMigration)).not.toThrow();
    }
  });

  it("a malformed VM is refused with type causes, not an exception", () => {
    expect(
      validateVm({
        spec: { template: { spec: { domain: { devices: { disks: "all" } } } } },
      } as unknown as VirtualMachine),
    ).toEqual([
      {
        type: "FieldValueTypeInvalid",
        message:
          'Invalid value: "all": spec.template.spec.domain.devices.disks in body must be of type array: "string"',
        field: "spec.template.spec.domain.devices.disks",
      },
    ]);
    expect(validateVm(null as unknown as VirtualMachine)).toEqual([
      { type: "FieldValueTypeInvalid", message: 'Invalid value: "null": body must be of type object', field: "" },
    ]);
  });

  it("the semantics accept partial objects (controllers see whatever is in the cache)", () => {
    const vm = { metadata: { name: "v" }, spec: {} } as VirtualMachine;
    const vmi = { metadata: { name: "v" } } as VirtualMachineInstance;
    expect(() => [
      planStart(vm, vmi),
      planStop(vm, vmi),
      planRestart(vm, vmi),
      planVmRun(vm, vmi, new Date()),
      printableStatus({ vm, vmi }),
    ]).not.toThrow();
  });
});
