import { describe, expect, it } from "vitest";
import { COMMON_INSTANCETYPES_VERSION, commonInstancetypes } from "./common-instancetypes.ts";
import type { VirtualMachineInstancetype, VirtualMachinePreference } from "./instancetype-types.ts";
import { validateInstancetype, validatePreference } from "./instancetype-validation.ts";

describe("commonInstancetypes(): the bundle the local cluster installs (common-instancetypes v1.7.0)", () => {
  const bundle = commonInstancetypes();
  const byName = (name: string) => {
    const o = bundle.find((x) => x.metadata.name === name);
    if (!o) throw new Error(`${name} is not in the bundle`);
    return o;
  };
  const names = (prefix: string) =>
    bundle
      .map((o) => o.metadata.name)
      .filter((n) => n.startsWith(`${prefix}.`))
      .sort();

  it.each([
    ["u1", ["2xlarge", "2xmedium", "4xlarge", "8xlarge", "large", "medium", "micro", "nano", "small", "xlarge"]],
    ["o1", ["2xlarge", "4xlarge", "8xlarge", "large", "medium", "micro", "nano", "small", "xlarge"]],
    ["cx1", ["medium", "large", "xlarge", "2xlarge", "4xlarge", "8xlarge"].flatMap((s) => [s, `${s}1gi`])],
    ["m1", ["large", "xlarge", "2xlarge", "4xlarge", "8xlarge"].flatMap((s) => [s, `${s}1gi`])],
    ["d1", ["2xlarge", "2xmedium", "4xlarge", "8xlarge", "large", "medium", "micro", "nano", "small", "xlarge"]],
    ["n1", ["medium", "large", "xlarge", "2xlarge", "4xlarge", "8xlarge"]],
    ["rt1", ["micro", "small", "medium", "large", "xlarge", "2xlarge", "4xlarge", "8xlarge"]],
  ])("the %s series has exactly KubeVirt's sizes", (prefix, sizes) => {
    expect(names(prefix)).toEqual(sizes.map((s) => `${prefix}.${s}`).sort());
  });

  it("holds KubeVirt's 54 preferences and 65 instancetypes, each name once", () => {
    const prefs = bundle.filter((o) => o.kind === "VirtualMachineClusterPreference").map((o) => o.metadata.name);
    expect(prefs).toHaveLength(54);
    expect(prefs).toEqual(
      expect.arrayContaining([
        "alpine",
        "centos.stream9",
        "cirros",
        "debian",
        "fedora",
        "fedora.arm64",
        "legacy",
        "linux",
        "linux.efi",
        "opensuse.leap",
        "rhel.9",
        "rhel.9.realtime",
        "sles",
        "ubuntu",
        "windows.11",
        "windows.2k22.virtio",
        "windows.xp",
      ]),
    );
    expect(bundle).toHaveLength(65 + 54);
    expect(new Set(bundle.map((o) => o.metadata.name)).size).toBe(bundle.length);
  });

  it.each([
    ["u1.nano", 1, "512Mi"],
    ["u1.medium", 1, "4Gi"],
    ["u1.2xmedium", 2, "4Gi"],
    ["u1.xlarge", 4, "16Gi"],
    ["u1.8xlarge", 32, "128Gi"],
    ["o1.large", 2, "8Gi"],
    ["cx1.medium", 1, "2Gi"],
    ["cx1.large1gi", 2, "4Gi"],
    ["cx1.2xlarge", 8, "16Gi"],
    ["cx1.8xlarge1gi", 32, "64Gi"],
    ["m1.large", 2, "16Gi"],
    ["m1.xlarge1gi", 4, "32Gi"],
    ["m1.4xlarge", 16, "128Gi"],
    ["m1.8xlarge", 32, "256Gi"],
  ])("%s is %i vCPU / %s, and its cpu, memory and size labels say so", (name, cpu, memory) => {
    const o = byName(name);
    const spec = o.spec as VirtualMachineInstancetype["spec"];
    expect(spec.cpu.guest).toBe(cpu);
    expect(spec.memory.guest).toBe(memory);
    expect(o.metadata.labels).toMatchObject({
      "instancetype.kubevirt.io/cpu": String(cpu),
      "instancetype.kubevirt.io/memory": memory,
      "instancetype.kubevirt.io/size": name.slice(name.indexOf(".") + 1),
    });
  });

  it("u1 and o1 sizes are cpu and memory only; o1 overcommits memory by 50 percent", () => {
    expect(byName("u1.medium").spec).toEqual({ cpu: { guest: 1 }, memory: { guest: "4Gi" } });
    expect(byName("o1.medium").spec).toEqual({ cpu: { guest: 1 }, memory: { guest: "4Gi", overcommitPercent: 50 } });
  });

  it("cx1 gives dedicated CPUs, an isolated emulator thread, NUMA passthrough, maxSockets and hugepages", () => {
    expect(byName("cx1.medium").spec).toEqual({
      cpu: {
        guest: 1,
        maxSockets: 1,
        dedicatedCPUPlacement: true,
        isolateEmulatorThread: true,
        numa: { guestMappingPassthrough: {} },
      },
      memory: { guest: "2Gi", hugepages: { pageSize: "2Mi" } },
      ioThreadsPolicy: "auto",
    });
    const xl = byName("cx1.4xlarge1gi").spec as VirtualMachineInstancetype["spec"];
    expect(xl.cpu.maxSockets).toBe(16);
    expect(xl.memory.hugepages).toEqual({ pageSize: "1Gi" });
  });

  it("m1 gives hugepages, 2Mi or (the 1gi sizes) 1Gi", () => {
    expect(byName("m1.large").spec).toEqual({
      cpu: { guest: 2 },
      memory: { guest: "16Gi", hugepages: { pageSize: "2Mi" } },
    });
    expect(byName("m1.large1gi").spec).toEqual({
      cpu: { guest: 2 },
      memory: { guest: "16Gi", hugepages: { pageSize: "1Gi" } },
    });
  });

  it.each([
    ["u1.small", "general.purpose", "pficon-server-group", "General Purpose", {}],
    ["o1.small", "overcommitted", "pficon-virtual-machine", "Overcommitted", {}],
    [
      "cx1.xlarge",
      "compute.exclusive",
      "pficon-registry",
      "Compute Exclusive",
      {
        "instancetype.kubevirt.io/dedicatedCPUPlacement": "true",
        "instancetype.kubevirt.io/isolateEmulatorThread": "true",
        "instancetype.kubevirt.io/numa": "true",
        "instancetype.kubevirt.io/hugepages": "2Mi",
      },
    ],
    [
      "m1.xlarge1gi",
      "memory.intensive",
      "fa-memory",
      "Memory Intensive",
      { "instancetype.kubevirt.io/hugepages": "1Gi" },
    ],
  ])("%s carries class %s, icon %s, display name %s and its feature labels", (name, cls, icon, display, extra) => {
    const o = byName(name);
    expect(o.metadata.labels).toEqual({
      "instancetype.kubevirt.io/class": cls,
      "instancetype.kubevirt.io/icon-pf": icon,
      "instancetype.kubevirt.io/version": "1",
      "instancetype.kubevirt.io/vendor": "kubevirt.io",
      "instancetype.kubevirt.io/common-instancetypes-version": COMMON_INSTANCETYPES_VERSION,
      "instancetype.kubevirt.io/cpu": o.metadata.labels["instancetype.kubevirt.io/cpu"],
      "instancetype.kubevirt.io/memory": o.metadata.labels["instancetype.kubevirt.io/memory"],
      "instancetype.kubevirt.io/size": o.metadata.labels["instancetype.kubevirt.io/size"],
      ...extra,
    });
    expect(o.metadata.annotations?.["instancetype.kubevirt.io/displayName"]).toBe(display);
    expect(o.metadata.annotations?.["instancetype.kubevirt.io/description"]).toMatch(/^The [A-Z]+ Series /);
  });

  it("a size carries the hugepages label exactly when it asks for hugepages (cx1, m1, n1, rt1)", () => {
    for (const o of bundle.filter((x) => x.kind === "VirtualMachineClusterInstancetype")) {
      const hugepages = (o.spec as VirtualMachineInstancetype["spec"]).memory.hugepages?.pageSize;
      expect(o.metadata.labels["instancetype.kubevirt.io/hugepages"], o.metadata.name).toBe(hugepages);
      expect(hugepages !== undefined, o.metadata.name).toBe(/^(cx1|m1|n1|rt1)\./.test(o.metadata.name));
    }
  });

  it("n1 and rt1 turn CRI-O's CPU balancing off; rt1 adds NUMA passthrough and realtime", () => {
    const off = {
      "cpu-load-balancing.crio.io": "disable",
      "cpu-quota.crio.io": "disable",
      "irq-load-balancing.crio.io": "disable",
    };
    expect(byName("n1.medium").spec).toEqual({
      annotations: off,
      cpu: { guest: 4, dedicatedCPUPlacement: true, isolateEmulatorThread: true },
      memory: { guest: "4Gi", hugepages: { pageSize: "1Gi" } },
    });
    expect(byName("rt1.large").spec).toEqual({
      annotations: off,
      cpu: {
        guest: 2,
        dedicatedCPUPlacement: true,
        isolateEmulatorThread: true,
        numa: { guestMappingPassthrough: {} },
        realtime: {},
      },
      memory: { guest: "8Gi", hugepages: { pageSize: "1Gi" } },
    });
    expect(byName("d1.small").spec).toEqual({
      cpu: { guest: 1, dedicatedCPUPlacement: true, isolateEmulatorThread: true },
      memory: { guest: "2Gi" },
      ioThreadsPolicy: "auto",
    });
  });

  it.each([
    ["linux", "linux", "Linux Guest", {}],
    ["ubuntu", "linux", "Ubuntu", { "instancetype.kubevirt.io/required-memory": "2Gi" }],
    [
      "fedora.arm64",
      "linux",
      "Fedora (arm64)",
      { "instancetype.kubevirt.io/arch": "arm64", "instancetype.kubevirt.io/required-architecture": "arm64" },
    ],
    [
      "windows.2k3",
      "windows",
      "Microsoft Windows Server 2003",
      { "instancetype.kubevirt.io/required-memory": "256Mi" },
    ],
    ["legacy", "legacy", "Legacy Guest", {}],
  ])("preference %s is for os-type %s, displayed as %s", (name, os, display, labels) => {
    const p = byName(name);
    expect(p.metadata.labels).toMatchObject({ "instancetype.kubevirt.io/os-type": os, ...labels });
    expect(p.metadata.annotations?.["openshift.io/display-name"]).toBe(display);
    expect((p.spec as VirtualMachinePreference["spec"]).annotations).toMatchObject({ "vm.kubevirt.io/os": os });
  });

  it("fedora prefers amd64 with secure-boot EFI and SMM; debian EFI without secure boot", () => {
    expect(byName("fedora").spec).toEqual({
      annotations: { "vm.kubevirt.io/os": "linux" },
      devices: { preferredDiskBus: "virtio", preferredInterfaceModel: "virtio", preferredRng: {} },
      features: { preferredSmm: {} },
      firmware: { preferredEfi: { secureBoot: true } },
      preferredArchitecture: "amd64",
      requirements: { architecture: "amd64", cpu: { guest: 1 }, memory: { guest: "2Gi" } },
    });
    expect(byName("debian").spec).toMatchObject({ firmware: { preferredEfi: { secureBoot: false } } });
  });

  it("windows.11 asks for 2 vCPUs and 4Gi, a persistent TPM and EFI, SATA and e1000e; its virtio twin for virtio", () => {
    const w = byName("windows.11").spec as VirtualMachinePreference["spec"];
    expect(w.requirements).toEqual({ cpu: { guest: 2 }, memory: { guest: "4Gi" } });
    expect(w.devices).toEqual({
      preferredAutoattachInputDevice: true,
      preferredDiskBus: "sata",
      preferredInterfaceModel: "e1000e",
      preferredTPM: { persistent: true },
    });
    expect(w.firmware).toEqual({ preferredEfi: { persistent: true, secureBoot: true } });
    expect(w.preferredTerminationGracePeriodSeconds).toBe(3600);
    expect(w.features?.preferredHyperv?.spinlocks).toEqual({ spinlocks: 8191 });
    const v = byName("windows.11.virtio").spec as VirtualMachinePreference["spec"];
    expect(v.devices).toMatchObject({
      preferredDiskBus: "virtio",
      preferredInterfaceModel: "virtio",
      preferredVideoType: "virtio",
    });
  });

  it("the cirros preference requires 1 vCPU and 256Mi and is labelled so", () => {
    const cirros = byName("cirros");
    expect(cirros.spec).toMatchObject({
      devices: { preferredDiskBus: "virtio", preferredInterfaceModel: "virtio", preferredRng: {} },
      requirements: { cpu: { guest: 1 }, memory: { guest: "256Mi" } },
    });
    expect(cirros.metadata.labels).toMatchObject({
      "instancetype.kubevirt.io/os-type": "linux",
      "instancetype.kubevirt.io/required-cpu": "1",
      "instancetype.kubevirt.io/required-memory": "256Mi",
    });
    expect(cirros.metadata.annotations?.["openshift.io/display-name"]).toBe("Cirros");
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
