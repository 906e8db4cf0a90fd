import { describe, expect, it } from "vitest";
import { vm, vmi } from "../testdata/objects.ts";
import { DEFAULT_CLUSTER_CONFIG } from "../validation/validation-config.ts";
import { validateVmiCreate } from "../validation/vmi-validation.ts";
import { defaultMigration } from "./migration-defaults.ts";
import { defaultVm, legacyFirmwareUuid, uuidV5 } from "./vm-defaults.ts";
import { DefaultingError, defaultVmi } from "./vmi-defaults.ts";

const fixed = { uuid: () => "11111111-2222-4333-8444-555555555555", now: () => "2026-01-01T00:00:00Z" };

describe("defaultVmi()", () => {
  it("applies KubeVirt's defaults to a minimal VMI", () => {
    const v = vmi();
    v.spec.domain.devices = {};
    delete v.spec.networks;
    v.spec.volumes = [{ name: "root", containerDisk: { image: "local/demo-linux" } }];
    v.spec.domain.resources = { requests: { memory: "1Gi" }, limits: { cpu: "2" } };
    const d = defaultVmi(v, fixed);
    expect(d.spec.architecture).toBe("amd64");
    expect(d.spec.domain.machine).toEqual({ type: "q35" });
    expect(d.spec.domain.resources?.requests).toEqual({ memory: "1Gi", cpu: "2" });
    expect(d.spec.domain.memory).toEqual({ guest: "1Gi", maxGuest: "4Gi" });
    expect(d.spec.domain.cpu).toEqual({ sockets: 2, cores: 1, threads: 1, model: "host-model", maxSockets: 8 });
    expect(d.spec.domain.devices.interfaces).toEqual([{ name: "default", bridge: {} }]);
    expect(d.spec.networks).toEqual([{ name: "default", pod: {} }]);
    expect(d.spec.domain.devices.disks).toEqual([{ name: "root", disk: { bus: "sata" } }]);
    expect(d.spec.volumes?.[0]?.containerDisk?.imagePullPolicy).toBe("Always");
    expect(d.spec.domain.firmware?.uuid).toBe("11111111-2222-4333-8444-555555555555");
    expect(d.spec.terminationGracePeriodSeconds).toBe(30);
    expect(d.metadata?.finalizers).toEqual(["kubevirt.io/foregroundDeleteVirtualMachine"]);
    expect(d.status).toEqual({
      phase: "Pending",
      phaseTransitionTimestamps: [{ phase: "Pending", phaseTransitionTimestamp: "2026-01-01T00:00:00Z" }],
      memory: { guestAtBoot: "1Gi", guestCurrent: "1Gi", guestRequested: "1Gi" },
      currentCPUTopology: { sockets: 2, cores: 1, threads: 1 },
    });
    expect(validateVmiCreate(d)).toEqual([]);
  });

  it.each([
    ["requests", { requests: { memory: "128Mi" }, limits: { memory: "256Mi" } }, "128Mi"],
    ["limits", { limits: { memory: "256Mi" } }, "256Mi"],
  ])("memory.guest comes from %s", (_n, resources, guest) => {
    const v = vmi();
    v.spec.domain.resources = resources;
    expect(defaultVmi(v, fixed).spec.domain.memory?.guest).toBe(guest);
  });

  it("keeps what the user set: uuid, topology, bus, interfaces, grace period, pull policy", () => {
    const v = vmi();
    v.spec.domain.firmware = { uuid: "user-uuid" };
    v.spec.domain.cpu = { cores: 2 };
    v.spec.terminationGracePeriodSeconds = 0;
    v.spec.volumes = [{ name: "containerdisk", containerDisk: { image: "reg/img:v1" } }];
    v.spec.domain.devices.disks = [{ name: "containerdisk", disk: { bus: "virtio" } }];
    const d = defaultVmi(v, fixed);
    expect(d.spec.domain.firmware?.uuid).toBe("user-uuid");
    expect(d.spec.domain.cpu).toMatchObject({ cores: 2, model: "host-model" });
    expect(d.spec.domain.cpu?.sockets).toBeUndefined();
    expect(d.spec.domain.devices.disks).toEqual([{ name: "containerdisk", disk: { bus: "virtio" } }]);
    expect(d.spec.domain.devices.interfaces).toEqual([{ name: "default", masquerade: {} }]);
    expect(d.spec.terminationGracePeriodSeconds).toBe(0);
    expect(d.spec.volumes?.[0]?.containerDisk?.imagePullPolicy).toBe("IfNotPresent");
  });

  it("a containerDisk without its (required) image defaults like Go's empty string, not a crash (fuzz lane)", () => {
    const v = vmi();
    v.spec.volumes = [{ name: "containerdisk", containerDisk: {} as { image: string } }];
    expect(defaultVmi(v, fixed).spec.volumes?.[0]?.containerDisk?.imagePullPolicy).toBe("Always");
  });

  it("a cdrom gets readonly, a closed tray and the sata bus; a small guest gets no memory hotplug", () => {
    const v = vmi();
    v.spec.domain.devices.disks = [{ name: "containerdisk", cdrom: {} }, { name: "cloudinitdisk" }];
    const d = defaultVmi(v, fixed);
    expect(d.spec.domain.devices.disks).toEqual([
      { name: "containerdisk", cdrom: { readonly: true, tray: "closed", bus: "sata" } },
      { name: "cloudinitdisk", disk: { bus: "sata" } },
    ]);
    expect(d.spec.domain.memory).toEqual({ guest: "64M" });
  });

  it("autoattachPodInterface: false means no default network", () => {
    const v = vmi();
    delete v.spec.networks;
    v.spec.domain.devices.interfaces = undefined;
    v.spec.domain.devices.autoattachPodInterface = false;
    expect(defaultVmi(v, fixed).spec.networks).toBeUndefined();
  });

  it("masquerade by cluster config, no hotplug with the Stage rollout", () => {
    const v = vmi();
    delete v.spec.networks;
    v.spec.domain.devices.interfaces = undefined;
    v.spec.domain.resources = { requests: { memory: "2Gi" } };
    const d = defaultVmi(v, {
      ...fixed,
      config: { ...DEFAULT_CLUSTER_CONFIG, defaultNetworkInterface: "masquerade", vmRolloutStrategy: "Stage" },
    });
    expect(d.spec.domain.devices.interfaces).toEqual([{ name: "default", masquerade: {} }]);
    expect(d.spec.domain.memory?.maxGuest).toBeUndefined();
    expect(d.spec.domain.cpu?.maxSockets).toBeUndefined();
  });

  it.each([
    ["bridge", true, [{ name: "default", bridge: {} }]],
    ["masquerade", false, [{ name: "default", masquerade: {} }]],
    ["something else", true, undefined],
  ])("the CR's defaultNetworkInterface %s (bridge permitted: %s) gives %j", (binding, permit, interfaces) => {
    const v = vmi();
    delete v.spec.networks;
    v.spec.domain.devices.interfaces = undefined;
    const config = {
      ...DEFAULT_CLUSTER_CONFIG,
      defaultNetworkInterface: binding,
      permitBridgeInterfaceOnPodNetwork: permit,
    };
    const d = defaultVmi(v, { ...fixed, config });
    expect(d.spec.domain.devices.interfaces).toEqual(interfaces);
    expect(d.spec.networks).toEqual([{ name: "default", pod: {} }]);
  });

  it.each([
    ["bridge", false, "bridge interface is not enabled in kubevirt-config"],
    ["slirp", true, "slirp interface is deprecated as of v1.3"],
  ])("refuses to default to %s (bridge permitted: %s) with KubeVirt's message", (binding, permit, message) => {
    const v = vmi();
    delete v.spec.networks;
    v.spec.domain.devices.interfaces = undefined;
    const config = {
      ...DEFAULT_CLUSTER_CONFIG,
      defaultNetworkInterface: binding,
      permitBridgeInterfaceOnPodNetwork: permit,
    };
    expect(() => defaultVmi(v, { ...fixed, config })).toThrow(new DefaultingError(message));
    // A VMI that names its interfaces is not defaulted, so the setting does not matter to it.
    expect(() => defaultVmi(vmi(), { ...fixed, config })).not.toThrow();
  });

  it("does not modify its input", () => {
    const v = vmi();
    const before = structuredClone(v);
    defaultVmi(v, fixed);
    expect(v).toEqual(before);
  });
});

describe("defaultVm()", () => {
  it("gives a new VM a firmware uuid and a distinct serial, once", () => {
    let n = 0;
    const uuid = () => `00000000-0000-4000-8000-00000000000${n++}`;
    const created = defaultVm(vm(), "CREATE", { uuid });
    const fw = created.spec.template?.spec?.domain.firmware;
    expect(fw).toEqual({
      uuid: "00000000-0000-4000-8000-000000000000",
      serial: "00000000-0000-4000-8000-000000000001",
    });
    expect(created.spec.template?.spec?.domain.machine).toEqual({ type: "q35" });
    // An update never changes the UUID, so every VMI of this VM boots with the same one.
    const updated = defaultVm(created, "UPDATE", { uuid });
    expect(updated.spec.template?.spec?.domain.firmware).toEqual(fw);
    expect(defaultVm(vm(), "UPDATE", { uuid }).spec.template?.spec?.domain.firmware).toBeUndefined();
  });

  it("legacy UUIDs are UUIDv5 of the VM name (RFC 4122 test vector for uuidV5)", () => {
    expect(uuidV5("6ba7b810-9dad-11d1-80b4-00c04fd430c8", "www.example.com")).toBe(
      "2ed6657d-e927-568b-95e1-2665a8aea6a2",
    );
    expect(legacyFirmwareUuid("vm-cirros")).toMatch(
      /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    );
    expect(legacyFirmwareUuid("vm-cirros")).toBe(legacyFirmwareUuid("vm-cirros"));
  });
});

describe("defaultMigration()", () => {
  it("adds the vmi-name label and the finalizer once", () => {
    const m = defaultMigration({ metadata: { name: "m", labels: { a: "b" } }, spec: { vmiName: "testvmi" } });
    expect(m.metadata?.labels).toEqual({ a: "b", "kubevirt.io/vmi-name": "testvmi" });
    expect(m.metadata?.finalizers).toEqual(["kubevirt.io/migrationJobFinalize"]);
    expect(defaultMigration(m).metadata?.finalizers).toEqual(["kubevirt.io/migrationJobFinalize"]);
  });
});
