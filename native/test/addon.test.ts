import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { loadAddon } from "../index.ts";

const hasKvm = existsSync("/dev/kvm");
if (!hasKvm) {
  console.warn("\n*** /dev/kvm is missing: the KVM tests of native are SKIPPED on this machine ***\n");
}

interface Addon {
  kvmApiVersion(): number;
}

describe("native addon", () => {
  it("loads and exports its functions", () => {
    const addon = loadAddon() as Addon;
    expect(typeof addon.kvmApiVersion).toBe("function");
  });

  it.skipIf(!hasKvm)("kvmApiVersion() reports the KVM API version from /dev/kvm (12)", () => {
    const addon = loadAddon() as Addon;
    expect(addon.kvmApiVersion()).toBe(12);
  });
});
