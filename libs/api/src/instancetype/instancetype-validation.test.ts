import { describe, expect, it } from "vitest";
import { vm } from "../testdata/objects.ts";
import type { VirtualMachine } from "../types.ts";
import {
  controllerRevisionFor,
  controllerRevisionName,
  resolveMatcher,
  syncStatusRef,
} from "./instancetype-revision.ts";
import type { PreferenceSpec, VirtualMachineInstancetype, VirtualMachinePreference } from "./instancetype-types.ts";
import {
  checkSpreadCpuTopology,
  DEPRECATED_LAUNCH_SECURITY_WARNING,
  validateInstancetype,
  validateMatchers,
  validatePreference,
} from "./instancetype-validation.ts";

const instancetype = (
  memory: Record<string, unknown>,
  extra: Record<string, unknown> = {},
): VirtualMachineInstancetype => ({
  apiVersion: "instancetype.kubevirt.io/v1beta1",
  kind: "VirtualMachineInstancetype",
  metadata: { name: "small" },
  spec: { cpu: { guest: 2 }, memory: { guest: "256Mi", ...memory }, ...extra },
});

const preference = (spec: PreferenceSpec): VirtualMachinePreference => ({
  apiVersion: "instancetype.kubevirt.io/v1beta1",
  kind: "VirtualMachinePreference",
  metadata: { name: "p" },
  spec,
});

describe("validateInstancetype(): KubeVirt pkg/instancetype/webhooks/admitter.go", () => {
  it.each<[string, Record<string, unknown>, string[]]>([
    ["a plain instancetype is valid", {}, []],
    ["overcommitPercent 0..100 (validateMemoryOvercommitPercentSetting)", { overcommitPercent: 100 }, []],
    [
      "overcommitPercent above 100 (validateMemoryOvercommitPercentSetting)",
      { overcommitPercent: 150 },
      ["spec.memory.overcommitPercent '150': must be in range between 0 and 100."],
    ],
    [
      "overcommitPercent below 0 (validateMemoryOvercommitPercentSetting)",
      { overcommitPercent: -1 },
      ["spec.memory.overcommitPercent '-1': must be in range between 0 and 100."],
    ],
    [
      "overcommitPercent with hugepages (validateMemoryOvercommitPercentNoHugepages)",
      { overcommitPercent: 10, hugepages: { pageSize: "2Mi" } },
      ["spec.memory.overcommitPercent and spec.memory.hugepages should not be requested together."],
    ],
  ])("%s", (_rule, memory, messages) => {
    for (const kind of ["VirtualMachineInstancetype", "VirtualMachineClusterInstancetype"] as const) {
      const { causes } = validateInstancetype(kind, instancetype(memory));
      expect(causes.map((c) => c.message)).toEqual(messages);
      for (const c of causes) expect(c.field).toBe("spec.memory.overcommitPercent");
    }
  });

  it("warns that launchSecurity is deprecated (checkForDeprecatedFields)", () => {
    const { warnings } = validateInstancetype("VirtualMachineInstancetype", instancetype({}, { launchSecurity: {} }));
    expect(warnings).toEqual([DEPRECATED_LAUNCH_SECURITY_WARNING]);
  });

  it("refuses a wrongly typed field with the schema's message", () => {
    const bad = instancetype({});
    (bad.spec.cpu as { guest: unknown }).guest = "two";
    expect(validateInstancetype("VirtualMachineInstancetype", bad).causes[0]?.field).toBe("spec.cpu.guest");
  });
});

describe("validatePreference(): KubeVirt pkg/instancetype/preference/webhooks/admitter.go", () => {
  it.each<[string, PreferenceSpec, string[], string[]]>([
    ["no CPU preference", {}, [], []],
    ["known topology", { cpu: { preferredCPUTopology: "cores" } }, [], []],
    [
      "unknown topology (validatePreferredCPUTopology)",
      { cpu: { preferredCPUTopology: "bogus" as "cores" } },
      ["unknown preferredCPUTopology bogus"],
      [],
    ],
    [
      "unsupported spread axis (validateSpreadOptions)",
      { cpu: { preferredCPUTopology: "spread", spreadOptions: { across: "Nowhere" as "CoresThreads" } } },
      ["across Nowhere is not supported"],
      [],
    ],
    [
      "CoresThreads with a ratio other than 2 (validateSpreadOptions)",
      { cpu: { preferredCPUTopology: "spread", spreadOptions: { across: "CoresThreads", ratio: 4 } } },
      ["only a ratio of 2 (1 core 2 threads) is allowed when spreading vCPUs over cores and threads"],
      [],
    ],
    [
      "deprecated topology (checkForDeprecatedPreferredCPUTopology)",
      { cpu: { preferredCPUTopology: "preferCores" } },
      [],
      ["PreferredCPUTopology preferCores is deprecated for removal in a future release, please use cores instead"],
    ],
  ])("%s", (_rule, spec, messages, warnings) => {
    const got = validatePreference("VirtualMachineClusterPreference", preference(spec));
    expect(got.causes.map((c) => c.message)).toEqual(messages);
    expect(got.warnings).toEqual(warnings);
  });
});

describe("checkSpreadCpuTopology(): the instancetype's vCPUs divide by the spread ratio (CheckSpreadCPUTopology)", () => {
  it.each<[number, PreferenceSpec, string | undefined]>([
    [4, { cpu: { preferredCPUTopology: "spread" } }, undefined],
    [
      3,
      { cpu: { preferredCPUTopology: "spread" } },
      "3 vCPUs provided by the instance type are not divisible by the Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio of 2 provided by the preference",
    ],
    [
      3,
      { cpu: { preferredCPUTopology: "spread", spreadOptions: { across: "CoresThreads" } } },
      "3 vCPUs provided by the instance type are not divisible by the number of threads per core 2",
    ],
    [3, { cpu: { preferredCPUTopology: "cores" } }, undefined],
  ])("%i vCPUs", (guest, pref, message) => {
    const c = checkSpreadCpuTopology({ cpu: { guest }, memory: { guest: "1Gi" } }, pref);
    expect(c?.message).toBe(message);
    if (c) expect(c.field).toBe("instancetype.spec.cpu.guest");
  });
});

describe("matchers and ControllerRevisions (pkg/instancetype/find, pkg/instancetype/revision)", () => {
  it.each<[string, string | undefined, string]>([
    ["instancetype", undefined, "VirtualMachineClusterInstancetype"],
    ["instancetype", "VirtualMachineInstancetype", "VirtualMachineInstancetype"],
    ["instancetype", "virtualmachineinstancetypes", "VirtualMachineInstancetype"],
    ["instancetype", "VirtualMachineClusterInstancetype", "VirtualMachineClusterInstancetype"],
    ["preference", undefined, "VirtualMachineClusterPreference"],
    ["preference", "VirtualMachinePreference", "VirtualMachinePreference"],
  ])("a %s matcher of kind %s resolves to %s", (role, kind, want) => {
    expect(resolveMatcher(role as "instancetype", { name: "x", kind }).kind).toBe(want);
  });

  it("an unknown kind is KubeVirt's error", () => {
    expect(() => resolveMatcher("instancetype", { name: "x", kind: "Pod" })).toThrow(
      "got unexpected kind in InstancetypeMatcher: Pod",
    );
  });

  it("names the revision <vm>-<object>-<version>-<uid>-<generation> and strips the object's metadata", () => {
    const v: VirtualMachine = vm("testvm");
    v.metadata = { name: "testvm", namespace: "default", uid: "vm-uid" };
    const cr = controllerRevisionFor(v, "VirtualMachineInstancetype", {
      metadata: { name: "small", uid: "it-uid", generation: 3, labels: { a: "b" }, resourceVersion: "7" },
      spec: { cpu: { guest: 2 }, memory: { guest: "256Mi" } },
    });
    expect(cr.metadata.name).toBe(controllerRevisionName("testvm", "small", "v1beta1", "it-uid", 3));
    expect(cr.metadata.name).toBe("testvm-small-v1beta1-it-uid-3");
    expect(cr.metadata.ownerReferences?.[0]).toMatchObject({ kind: "VirtualMachine", uid: "vm-uid", controller: true });
    expect(cr.metadata.labels?.["instancetype.kubevirt.io/object-kind"]).toBe("VirtualMachineInstancetype");
    expect(cr.data?.kind).toBe("VirtualMachineInstancetype");
    expect(cr.data?.apiVersion).toBe("instancetype.kubevirt.io/v1beta1");
    expect(cr.data?.metadata).toEqual({ name: "small", uid: "it-uid", generation: 3, resourceVersion: "7" });
  });

  it("syncStatusRef(): a new name drops the pinned revision; revisionName pins one", () => {
    const pinned = { name: "a", controllerRevisionRef: { name: "r1" } };
    expect(syncStatusRef({ name: "a" }, pinned)).toEqual({ ref: pinned, needsRevision: false });
    expect(syncStatusRef({ name: "b" }, pinned)).toEqual({ ref: { name: "b" }, needsRevision: true });
    expect(syncStatusRef({ name: "a", revisionName: "r2" }, undefined)).toEqual({
      ref: { name: "a", controllerRevisionRef: { name: "r2" } },
      needsRevision: false,
    });
  });
});

describe("validateMatchers(): KubeVirt's VM mutator (validateInstancetypeMatcher, validateMatcherUpdate)", () => {
  it.each<[string, Record<string, unknown>, string[], string[]]>([
    ["a name is enough", { instancetype: { name: "a" }, preference: { name: "b" } }, [], []],
    [
      "neither name nor inferFromVolume",
      { instancetype: { kind: "VirtualMachineInstancetype" } },
      ["Either Name or InferFromVolume should be provided within the InstancetypeMatcher"],
      ["spec.instancetype"],
    ],
    [
      "preference without a name",
      { preference: {} },
      ["Either Name or InferFromVolume should be provided within the PreferenceMatcher"],
      ["spec.preference"],
    ],
    [
      "inferFromVolume with name and kind",
      { instancetype: { name: "a", kind: "k", inferFromVolume: "root" } },
      [
        "Name already set, should be cleared before setting inferFromVolume",
        "Kind already set, should be cleared before setting inferFromVolume",
      ],
      ["spec.instancetype.name", "spec.instancetype.kind"],
    ],
    [
      "unknown failure policy",
      { instancetype: { inferFromVolume: "root", inferFromVolumeFailurePolicy: "Maybe" } },
      ["Invalid value 'Maybe' for InferFromVolumeFailurePolicy"],
      ["spec.instancetype.inferFromVolumeFailurePolicy"],
    ],
  ])("%s", (_rule, spec, messages, fields) => {
    const causes = validateMatchers({ spec });
    expect(causes.map((c) => c.message)).toEqual(messages);
    expect(causes.map((c) => c.field)).toEqual(fields);
  });

  it("refuses renaming a matcher that keeps its revisionName", () => {
    const before = { spec: { instancetype: { name: "a", revisionName: "r" } } };
    expect(validateMatchers({ spec: { instancetype: { name: "b", revisionName: "r" } } }, before)).toEqual([
      {
        type: "FieldValueInvalid",
        message: "the Matcher Name has been updated without updating the RevisionName",
        field: "spec.instancetype.revisionName",
      },
    ]);
    expect(validateMatchers({ spec: { instancetype: { name: "b", revisionName: "r2" } } }, before)).toEqual([]);
  });
});
