/**
 * The instancetype.kubevirt.io objects of KubeVirt's examples/ (clarge, csmall, cluster-csmall, virtio, windows),
 * written here as objects of the same content: each decodes strictly (no unknown field) and passes its webhook. The
 * examples' VMs (vm-cirros-csmall and friends, generated from a base VM with memory.guest 128Mi) keep that memory, so
 * KubeVirt's own conflict rule refuses them once their instancetype exists; this pins that we do the same.
 */
import { describe, expect, it } from "vitest";
import { decodeStrict } from "../strict-decode.ts";
import type { VirtualMachineInstanceSpec } from "../types.ts";
import { applyInstancetypeToVmi } from "./instancetype-apply.ts";
import type { VirtualMachineInstancetype, VirtualMachinePreference } from "./instancetype-types.ts";
import { validateInstancetype, validatePreference } from "./instancetype-validation.ts";

const V = "instancetype.kubevirt.io/v1beta1";
const sized = (kind: string, name: string, guest: number, memory: string) => ({
  apiVersion: V,
  kind,
  metadata: { name },
  spec: { cpu: { guest }, memory: { guest: memory } },
});

const INSTANCETYPES = [
  sized("VirtualMachineInstancetype", "clarge", 4, "2Gi"),
  sized("VirtualMachineInstancetype", "csmall", 1, "128Mi"),
  sized("VirtualMachineClusterInstancetype", "cluster-csmall", 1, "128Mi"),
];

const PREFERENCES = [
  {
    apiVersion: V,
    kind: "VirtualMachinePreference",
    metadata: { name: "virtio" },
    spec: { devices: { preferredDiskBus: "virtio", preferredInterfaceModel: "virtio" } },
  },
  {
    apiVersion: V,
    kind: "VirtualMachinePreference",
    metadata: { name: "windows" },
    spec: {
      clock: {
        preferredClockOffset: { utc: {} },
        preferredTimer: {
          hpet: { present: false },
          hyperv: {},
          pit: { tickPolicy: "delay" },
          rtc: { tickPolicy: "catchup" },
        },
      },
      cpu: { preferredCPUTopology: "sockets" },
      devices: { preferredDiskBus: "sata", preferredInterfaceModel: "e1000", preferredTPM: {} },
      features: {
        preferredAcpi: {},
        preferredApic: {},
        preferredHyperv: { relaxed: {}, spinlocks: { spinlocks: 8191 }, vapic: {} },
        preferredSmm: {},
      },
      firmware: { preferredEfi: { secureBoot: true } },
    },
  },
];

describe("KubeVirt's instancetype examples", () => {
  it.each(INSTANCETYPES)("$metadata.name decodes strictly and validates", (obj) => {
    expect(decodeStrict(obj.kind, obj).unknownFields).toEqual([]);
    const kind = obj.kind as "VirtualMachineInstancetype";
    expect(validateInstancetype(kind, obj as VirtualMachineInstancetype)).toEqual({ causes: [], warnings: [] });
  });

  it.each(PREFERENCES)("$metadata.name decodes strictly and validates", (obj) => {
    expect(decodeStrict(obj.kind, obj).unknownFields).toEqual([]);
    const kind = obj.kind as "VirtualMachinePreference";
    expect(validatePreference(kind, obj as VirtualMachinePreference)).toEqual({ causes: [], warnings: [] });
  });

  it("vm-cirros-csmall's template (memory.guest 128Mi) conflicts with csmall, as KubeVirt's validateMemory says", () => {
    const template = {
      domain: {
        devices: {
          disks: [
            { disk: {}, name: "containerdisk" },
            { disk: { bus: "virtio" }, name: "cloudinitdisk" },
          ],
        },
        memory: { guest: "128Mi" },
        resources: {},
      },
      terminationGracePeriodSeconds: 0,
    } as unknown as VirtualMachineInstanceSpec;
    const csmall = INSTANCETYPES[1]?.spec;
    const conflicts = applyInstancetypeToVmi("spec.template.spec", csmall, undefined, template, {});
    expect(conflicts.map((c) => c.message)).toEqual([
      "VM field(s) spec.template.spec.domain.memory.guest conflicts with selected instance type",
    ]);
  });
});
