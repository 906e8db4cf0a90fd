import { describe, expect, it } from "vitest";
import { vmi } from "../testdata/objects.ts";
import type { DeveloperConfiguration, VirtualMachineInstanceMigration } from "../types.ts";
import { admitMigrationCreate } from "./migration-validation.ts";

const migration = (
  spec: Partial<NonNullable<VirtualMachineInstanceMigration["spec"]>>,
): VirtualMachineInstanceMigration => ({
  apiVersion: "kubevirt.io/v1",
  kind: "VirtualMachineInstanceMigration",
  metadata: { name: "m", namespace: "default" },
  spec: { vmiName: "testvmi", ...spec },
});

const admit = (m: VirtualMachineInstanceMigration, dev?: DeveloperConfiguration) => {
  const d = admitMigrationCreate(m, {
    vmi: { ...vmi(), status: { phase: "Running" } },
    migrationsOfVmi: [],
    developerConfiguration: dev,
  });
  return d && { code: d.code, causes: d.causes };
};

describe("cross-cluster (decentralized) migrations: sendTo / receive (KubeVirt migration-create-admitter)", () => {
  it("refused with KubeVirt's message when DecentralizedLiveMigration (beta) is disabled", () => {
    expect(
      admit(migration({ sendTo: { migrationID: "a", connectURL: "x:1" } }), {
        disabledFeatureGates: ["DecentralizedLiveMigration"],
      }),
    ).toEqual({
      code: 422,
      causes: [
        {
          type: "FieldValueNotSupported",
          message: "DecentralizedLiveMigration feature gate is not enabled in kubevirt resource",
          field: "",
        },
      ],
    });
  });

  it("mismatched migration IDs refused with KubeVirt's message", () => {
    const m = migration({ sendTo: { migrationID: "a", connectURL: "x:1" }, receive: { migrationID: "b" } });
    expect(admit(m)).toEqual({
      code: 422,
      causes: [
        { type: "FieldValueInvalid", message: "sendTo migrationID a does not match receive migrationID b", field: "" },
      ],
    });
  });

  it.each([
    ["spec.sendTo", migration({ sendTo: { migrationID: "a", connectURL: "x:1" } })],
    ["spec.receive", migration({ receive: { migrationID: "a" } })],
  ])("%s with the gate on is refused as unsupported here, never run as a local migration", (field, m) => {
    expect(admit(m)).toEqual({
      code: 422,
      causes: [
        {
          type: "FieldValueNotSupported",
          message: `${field} is not supported: this platform has no cross-cluster live migration`,
          field,
        },
      ],
    });
  });

  it("an ordinary migration is admitted", () => {
    expect(admit(migration({}))).toBeUndefined();
  });
});
