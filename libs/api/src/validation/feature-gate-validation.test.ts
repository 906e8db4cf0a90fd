import { describe, expect, it } from "vitest";
import { featureGateEnabled, featureGateState, featureGateWarnings } from "../semantics/feature-gates.ts";
import { vm, vmi } from "../testdata/objects.ts";
import type { DeveloperConfiguration, VirtualMachine, VirtualMachineInstance } from "../types.ts";
import { DEFAULT_CLUSTER_CONFIG } from "./validation-config.ts";
import { validateVm } from "./vm-validation.ts";
import { validateVmiCreate } from "./vmi-validation.ts";

const INV = "FieldValueInvalid";
const config = (dev?: DeveloperConfiguration) => ({ ...DEFAULT_CLUSTER_CONFIG, developerConfiguration: dev });
const gateCauses = (v: VirtualMachineInstance, dev?: DeveloperConfiguration) =>
  validateVmiCreate(v, { config: config(dev) }).filter((c) => /feature gate|Passt|Macvtap/.test(c.message));

describe("feature gates (KubeVirt featuregate.IsEnabled)", () => {
  it.each<[string, DeveloperConfiguration | undefined, boolean, string]>([
    ["HostDisk", undefined, false, "alpha: off by default"],
    ["HostDisk", { featureGates: ["HostDisk"] }, true, "alpha: on when listed"],
    ["RebootPolicy", undefined, true, "beta: on by default"],
    ["RebootPolicy", { disabledFeatureGates: ["RebootPolicy"] }, false, "beta: off when disabled"],
    ["LiveMigration", { disabledFeatureGates: ["LiveMigration"] }, true, "GA: always on"],
    ["NoSuchGate", { featureGates: ["NoSuchGate"] }, false, "unknown: off"],
  ])("%s with %j is %s (%s)", (gate, dev, enabled) => {
    expect(featureGateEnabled(gate, dev)).toBe(enabled);
  });

  it("states are KubeVirt's spelling", () => {
    expect(featureGateState("Sidecar")).toBe("Alpha");
    expect(featureGateState("GPU")).toBe("General Availability");
    expect(featureGateState("HotplugVolumes")).toBe("Deprecated");
    expect(featureGateState("Passt")).toBe("Discontinued");
  });

  it("listing GA, deprecated and discontinued gates earns KubeVirt's warnings; alpha and beta none", () => {
    expect(featureGateWarnings({ featureGates: ["HostDisk", "Snapshot", "GPU", "HotplugVolumes", "Macvtap"] })).toEqual(
      [
        'feature gate GPU is deprecated (feature state is "General Availability"), therefore it can be safely removed and is redundant. For more info, please look at: https://github.com/kubevirt/kubevirt/blob/main/docs/deprecation.md',
        "HotplugVolumes has been deprecated since v1.9.0 and has been replaced by DeclarativeHotplugVolumes",
        "Macvtap network binding is discontinued since v1.3. Please refer to Kubevirt user guide for alternatives.",
      ],
    );
  });
});

type Case = [string, (v: VirtualMachineInstance) => void, string, { message: string; field: string }];

describe("gated VMI fields are refused until their gate is on (KubeVirt vmi-create-admitter)", () => {
  it.each<Case>([
    [
      "HostDisk: hostDisk volume",
      (v) => {
        v.spec.volumes = [{ name: "hd", hostDisk: { path: "/var/lib/hd.img", type: "DiskOrCreate", capacity: "1Mi" } }];
      },
      "HostDisk",
      { message: "HostDisk feature gate is not enabled", field: "spec.volumes[0]" },
    ],
    [
      "Sidecar: hook sidecar annotation",
      (v) => {
        v.metadata = { ...v.metadata, annotations: { "hooks.kubevirt.io/hookSidecars": '[{"image":"x"}]' } };
      },
      "Sidecar",
      {
        message:
          "sidecar feature gate is not enabled in kubevirt-config, invalid entry metadata.annotations.hooks.kubevirt.io/hookSidecars",
        field: "metadata.annotations",
      },
    ],
    [
      "ExperimentalIgnitionSupport: ignition annotation",
      (v) => {
        v.metadata = { ...v.metadata, annotations: { "kubevirt.io/ignitiondata": "{}" } };
      },
      "ExperimentalIgnitionSupport",
      {
        message:
          "ExperimentalIgnitionSupport feature gate is not enabled in kubevirt-config, invalid entry metadata.annotations.kubevirt.io/ignitiondata",
        field: "metadata.annotations",
      },
    ],
    [
      "DownwardMetrics: volume",
      (v) => {
        v.spec.volumes = [{ name: "m", downwardMetrics: {} }];
      },
      "DownwardMetrics",
      {
        message: "downwardMetrics disks are not allowed: DownwardMetrics feature gate is not enabled.",
        field: "spec.volumes[0]",
      },
    ],
    [
      "DownwardMetrics: device",
      (v) => {
        v.spec.domain.devices.downwardMetrics = {};
      },
      "DownwardMetrics",
      {
        message: "downwardMetrics virtio serial is not allowed: DownwardMetrics feature gate is not enabled",
        field: "spec.domain.devices.downwardMetrics",
      },
    ],
    [
      "VSOCK: autoattachVSOCK",
      (v) => {
        v.spec.domain.devices.autoattachVSOCK = true;
      },
      "VSOCK",
      {
        message: "VSOCK feature gate is not enabled in kubevirt-config",
        field: "spec.domain.devices.autoattachVSOCK",
      },
    ],
    [
      "ReservedOverheadMemlock: reservedOverhead",
      (v) => {
        v.spec.domain.memory = { ...v.spec.domain.memory, reservedOverhead: { addedOverhead: "10Mi" } };
      },
      "ReservedOverheadMemlock",
      {
        message: "Reserved overhead memlock feature gate is not enabled in kubevirt-config",
        field: "spec.domain.memory.reservedOverhead",
      },
    ],
  ])("%s", (_, mutate, gate, expected) => {
    const v = vmi();
    mutate(v);
    expect(gateCauses(v)).toEqual([{ type: INV, ...expected }]);
    expect(gateCauses(v, { featureGates: [gate] })).toEqual([]);
  });

  it("HostDevices names the field as KubeVirt does (its Go name)", () => {
    const v = vmi();
    v.spec.domain.devices.hostDevices = [{ name: "h", deviceName: "intel.com/qat" }];
    expect(gateCauses(v)).toEqual([
      { type: INV, message: "Host Devices feature gate is not enabled in kubevirt-config", field: "spec.HostDevices" },
    ]);
  });

  it("RebootPolicy (beta) is allowed by default and refused when disabled", () => {
    const v = vmi();
    v.spec.domain.rebootPolicy = "Terminate";
    expect(gateCauses(v)).toEqual([]);
    expect(gateCauses(v, { disabledFeatureGates: ["RebootPolicy"] })).toEqual([
      {
        type: INV,
        message: "RebootPolicy is specified but the RebootPolicy feature gate is not enabled",
        field: "spec.domain.rebootPolicy",
      },
    ]);
  });

  it("a discontinued gate still listed refuses a VMI using its API (ValidateFeatureGates)", () => {
    const v = vmi();
    v.spec.domain.devices.interfaces = [{ name: "default", passt: {} }];
    expect(gateCauses(v, { featureGates: ["Passt"] })).toEqual([
      {
        type: "FieldValueNotSupported",
        message:
          "Passt network binding is discontinued since v1.3. Please refer to Kubevirt user guide for alternatives.",
        field: "",
      },
    ]);
  });

  it("a VM template's sidecar annotation is refused at spec.template.metadata, also for KubeVirt's accounts", () => {
    const v: VirtualMachine = vm();
    v.spec.template.metadata = { annotations: { "hooks.kubevirt.io/hookSidecars": "[]x" } };
    const causes = validateVm(v, { isKubeVirtServiceAccount: true, config: config() });
    expect(causes.filter((c) => c.message.includes("sidecar"))).toEqual([
      {
        type: INV,
        message:
          "sidecar feature gate is not enabled in kubevirt-config, invalid entry spec.template.metadata.annotations.hooks.kubevirt.io/hookSidecars",
        field: "spec.template.metadata.annotations",
      },
    ]);
  });
});
