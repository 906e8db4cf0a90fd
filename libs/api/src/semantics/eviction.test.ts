import { describe, expect, it } from "vitest";
import type { VirtualMachineInstance } from "../types.ts";
import { migratableOnEviction, vmiEvictionStrategy } from "./eviction.ts";

const vmi = (strategy: string | undefined, migratable: boolean): VirtualMachineInstance =>
  ({
    metadata: { name: "v" },
    spec: { domain: { devices: {} }, ...(strategy ? { evictionStrategy: strategy } : {}) },
    status: { conditions: [{ type: "LiveMigratable", status: migratable ? "True" : "False" }] },
  }) as VirtualMachineInstance;

describe("eviction semantics", () => {
  it.each([
    ["LiveMigrate", undefined, false, "LiveMigrate", true],
    ["LiveMigrateIfPossible", undefined, true, "LiveMigrateIfPossible", true],
    ["LiveMigrateIfPossible", undefined, false, "LiveMigrateIfPossible", false],
    ["External", undefined, true, "External", false],
    ["None", "LiveMigrate", true, "None", false],
    [undefined, "LiveMigrate", true, "LiveMigrate", true],
    [undefined, undefined, true, undefined, false],
  ] as const)("VMI %s, cluster %s, migratable %s: strategy %s, migrate on eviction %s", (own, cluster, m, s, want) => {
    const config = cluster ? { evictionStrategy: cluster } : undefined;
    expect(vmiEvictionStrategy(vmi(own, m), config)).toBe(s);
    expect(migratableOnEviction(vmi(own, m), config)).toBe(want);
  });
});
