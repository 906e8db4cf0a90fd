import { describe, expect, it } from "vitest";
import type { VirtualMachineInstanceSpec } from "../types.ts";
import { applyInstancetypeToVmi, guestTopology, overcommittedRequest } from "./instancetype-apply.ts";
import type { InstancetypeSpec, PreferenceSpec } from "./instancetype-types.ts";

// biome-ignore lint/suspicious/noExplicitAny: the fixtures poke and read arbitrary JSON paths of the expanded spec.
type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

const it2x256: InstancetypeSpec = { cpu: { guest: 2 }, memory: { guest: "256Mi" } };

function template(): VirtualMachineInstanceSpec {
  return {
    domain: {
      devices: {
        disks: [{ name: "containerdisk" }, { name: "cloudinit", cdrom: {} }],
        interfaces: [{ name: "default", masquerade: {} }],
      },
    },
    networks: [{ name: "default", pod: {} }],
    volumes: [],
  };
}

function apply(
  it: InstancetypeSpec | undefined,
  pref: PreferenceSpec | undefined,
  mutate: (s: Json) => void = () => {},
) {
  const spec = template();
  mutate(spec as Json);
  const metadata: { annotations?: Record<string, string> } = {};
  const conflicts = applyInstancetypeToVmi("spec.template.spec", it, pref, spec, metadata);
  return { spec: spec as Json, metadata, conflicts };
}

describe("applyInstancetypeToVmi(): KubeVirt pkg/instancetype/apply", () => {
  it("sets the guest CPU topology and memory from the instancetype (applyCPU, applyMemory)", () => {
    const { spec, conflicts } = apply(it2x256, undefined);
    expect(conflicts).toEqual([]);
    expect(spec.domain.cpu).toEqual({ sockets: 2, cores: 1, threads: 1 });
    expect(spec.domain.memory).toEqual({ guest: "256Mi" });
  });

  it.each<[string, (s: Json) => void, string[]]>([
    [
      "validateCPU: resources.requests.cpu",
      (s) => (s.domain.resources = { requests: { cpu: "1" } }),
      ["spec.template.spec.domain.resources.requests.cpu"],
    ],
    [
      "validateCPU: resources.limits.cpu",
      (s) => (s.domain.resources = { limits: { cpu: "1" } }),
      ["spec.template.spec.domain.resources.limits.cpu"],
    ],
    [
      "validateCPU: sockets and cores (every CPU conflict is reported)",
      (s) => (s.domain.cpu = { sockets: 1, cores: 2 }),
      ["spec.template.spec.domain.cpu.sockets", "spec.template.spec.domain.cpu.cores"],
    ],
    ["validateCPU: threads", (s) => (s.domain.cpu = { threads: 1 }), ["spec.template.spec.domain.cpu.threads"]],
    [
      "validateMemory: memory.guest",
      (s) => (s.domain.memory = { guest: "128Mi" }),
      ["spec.template.spec.domain.memory.guest"],
    ],
    [
      "validateMemory: resources.requests.memory",
      (s) => (s.domain.resources = { requests: { memory: "128Mi" } }),
      ["spec.template.spec.domain.resources.requests.memory"],
    ],
    [
      "validateMemory: only the first memory conflict",
      (s) => (s.domain.resources = { requests: { memory: "128Mi" }, limits: { memory: "128Mi" } }),
      ["spec.template.spec.domain.resources.requests.memory"],
    ],
  ])("refuses a VM that sets what the instancetype owns (%s)", (_rule, mutate, fields) => {
    const { conflicts } = apply(it2x256, undefined, mutate);
    expect(conflicts.map((c) => c.field)).toEqual(fields);
    expect(conflicts[0]?.message).toBe(`VM field(s) ${fields[0]} conflicts with selected instance type`);
  });

  it("conflicts on model only when the instancetype sets one (validateCPU)", () => {
    const mutate = (s: Json) => (s.domain.cpu = { model: "host-model" });
    expect(apply(it2x256, undefined, mutate).conflicts).toEqual([]);
    expect(apply({ ...it2x256, cpu: { guest: 2, model: "Haswell" } }, undefined, mutate).conflicts[0]?.field).toBe(
      "spec.template.spec.domain.cpu.model",
    );
  });

  it.each<[string, InstancetypeSpec, (s: Json) => void, string]>([
    [
      "applyNodeSelector",
      { ...it2x256, nodeSelector: { a: "b" } },
      (s) => (s.nodeSelector = { c: "d" }),
      "spec.template.spec.nodeSelector",
    ],
    [
      "applySchedulerName",
      { ...it2x256, schedulerName: "x" },
      (s) => (s.schedulerName = "y"),
      "spec.template.spec.schedulerName",
    ],
    [
      "applyGPUs",
      { ...it2x256, gpus: [{ name: "g" }] },
      (s) => (s.domain.devices.gpus = [{ name: "h" }]),
      "spec.template.spec.domain.devices.gpus",
    ],
  ])("owned fields conflict (%s)", (_rule, it, mutate, field) => {
    expect(apply(it, undefined, mutate).conflicts.map((c) => c.field)).toEqual([field]);
  });

  it("copies nodeSelector, schedulerName, hugepages and maxGuest; annotations conflict only on another value", () => {
    const it: InstancetypeSpec = {
      cpu: { guest: 1, dedicatedCPUPlacement: true },
      memory: { guest: "1Gi", hugepages: { pageSize: "2Mi" }, maxGuest: "4Gi" },
      nodeSelector: { zone: "a" },
      schedulerName: "custom",
      annotations: { "example.com/a": "1" },
    };
    const { spec, metadata, conflicts } = apply(it, undefined);
    expect(conflicts).toEqual([]);
    expect(spec.nodeSelector).toEqual({ zone: "a" });
    expect(spec.schedulerName).toBe("custom");
    expect(spec.domain.cpu).toEqual({ dedicatedCpuPlacement: true, sockets: 1, cores: 1, threads: 1 });
    expect(spec.domain.memory).toEqual({ guest: "1Gi", hugepages: { pageSize: "2Mi" }, maxGuest: "4Gi" });
    expect(metadata.annotations).toEqual({ "example.com/a": "1" });
    const again = applyInstancetypeToVmi("spec", it, undefined, template(), { annotations: { "example.com/a": "2" } });
    expect(again.map((c) => c.field)).toEqual(["annotations.example.com/a"]);
  });

  it.each([
    // float32 arithmetic as KubeVirt: 1Gi * 0.9 is 966367616, not 966367641.6
    ["1Gi", 10, "966367616"],
    ["512Mi", 50, "256Mi"],
    ["2G", 25, "1500M"],
  ])("overcommitPercent: guest %s at %i%% requests %s of the pod (applyMemory)", (guest, percent, want) => {
    expect(overcommittedRequest(guest, percent)).toBe(want);
    const { spec } = apply({ cpu: { guest: 1 }, memory: { guest, overcommitPercent: percent } }, undefined);
    expect(spec.domain.resources.requests.memory).toBe(want);
  });
});

describe("guestTopology(): preferredCPUTopology (applyGuestCPUTopology)", () => {
  it.each<[string | undefined, number, { sockets: number; cores: number; threads: number }]>([
    [undefined, 4, { sockets: 4, cores: 1, threads: 1 }],
    ["sockets", 4, { sockets: 4, cores: 1, threads: 1 }],
    ["preferSockets", 4, { sockets: 4, cores: 1, threads: 1 }],
    ["any", 4, { sockets: 4, cores: 1, threads: 1 }],
    ["cores", 4, { sockets: 1, cores: 4, threads: 1 }],
    ["preferCores", 4, { sockets: 1, cores: 4, threads: 1 }],
    ["threads", 4, { sockets: 1, cores: 1, threads: 4 }],
    ["spread", 4, { sockets: 2, cores: 2, threads: 1 }],
    ["cores", 1, { sockets: 1, cores: 1, threads: 1 }],
  ])("%s with %i vCPUs", (topology, vcpus, want) => {
    const pref = topology ? ({ cpu: { preferredCPUTopology: topology } } as PreferenceSpec) : undefined;
    expect(guestTopology(vcpus, pref)).toEqual(want);
  });

  it("spread across CoresThreads and SocketsCoresThreads", () => {
    expect(
      guestTopology(4, { cpu: { preferredCPUTopology: "spread", spreadOptions: { across: "CoresThreads" } } }),
    ).toEqual({
      sockets: 1,
      cores: 2,
      threads: 2,
    });
    expect(
      guestTopology(8, { cpu: { preferredCPUTopology: "spread", spreadOptions: { across: "SocketsCoresThreads" } } }),
    ).toEqual({ sockets: 2, cores: 2, threads: 2 });
  });
});

describe("preferences: defaults only where the VM is silent (pkg/instancetype/preference/apply)", () => {
  const pref: PreferenceSpec = {
    devices: {
      preferredDiskBus: "sata",
      preferredCdromBus: "sata",
      preferredInterfaceModel: "e1000",
      preferredAutoattachSerialConsole: true,
    },
    machine: { preferredMachineType: "q35" },
    preferredTerminationGracePeriodSeconds: 15,
    preferredSubdomain: "sub",
    annotations: { "example.com/p": "1" },
  };

  it("fills disk/cdrom bus, interface model, autoattach, machine type, grace period, subdomain, annotations", () => {
    const { spec, metadata, conflicts } = apply(undefined, pref);
    expect(conflicts).toEqual([]);
    expect(spec.domain.devices.disks).toEqual([
      { name: "containerdisk", disk: { bus: "sata" } },
      { name: "cloudinit", cdrom: { bus: "sata" } },
    ]);
    expect(spec.domain.devices.interfaces[0].model).toBe("e1000");
    expect(spec.domain.devices.autoattachSerialConsole).toBe(true);
    expect(spec.domain.machine).toEqual({ type: "q35" });
    expect(spec.terminationGracePeriodSeconds).toBe(15);
    expect(spec.subdomain).toBe("sub");
    expect(metadata.annotations).toEqual({ "example.com/p": "1" });
  });

  it("keeps what the VM sets", () => {
    const { spec } = apply(undefined, pref, (s) => {
      s.domain.devices.disks[0].disk = { bus: "virtio" };
      s.domain.devices.interfaces[0].model = "virtio";
      s.domain.devices.autoattachSerialConsole = false;
      s.terminationGracePeriodSeconds = 0;
    });
    expect(spec.domain.devices.disks[0].disk.bus).toBe("virtio");
    expect(spec.domain.devices.interfaces[0].model).toBe("virtio");
    expect(spec.domain.devices.autoattachSerialConsole).toBe(false);
    expect(spec.terminationGracePeriodSeconds).toBe(0);
  });

  it("is not applied when the instancetype conflicts", () => {
    const { spec, conflicts } = apply(it2x256, pref, (s) => (s.domain.memory = { guest: "1Gi" }));
    expect(conflicts).toHaveLength(1);
    expect(spec.domain.machine).toBeUndefined();
  });

  it("the preference's topology shapes the instancetype's vCPUs", () => {
    const { spec } = apply({ cpu: { guest: 4 }, memory: { guest: "1Gi" } }, { cpu: { preferredCPUTopology: "cores" } });
    expect(spec.domain.cpu).toEqual({ sockets: 1, cores: 4, threads: 1 });
  });
});
