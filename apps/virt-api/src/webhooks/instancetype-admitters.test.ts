import { type ControllerRevision, commonInstancetypes, type InstancetypeObject, type ResolvedMatcher } from "@kvt/api";
import { describe, expect, it } from "vitest";
import { FakeCluster } from "../fake/fake-cluster.ts";
import type { AdmissionRequest } from "./admission.ts";
import { mutateVmWith, validateVm, webhookRoutes } from "./admitters.ts";
import type { InstancetypeReader } from "./instancetype-admitters.ts";

/** Instancetypes by `<plural>/<name>`, revisions by name. */
class FakeReader implements InstancetypeReader {
  readonly objects = new Map<string, InstancetypeObject>();
  readonly revisions = new Map<string, ControllerRevision>();
  get(m: ResolvedMatcher): Promise<InstancetypeObject | undefined> {
    return Promise.resolve(this.objects.get(`${m.plural}/${m.name}`));
  }
  getControllerRevision(_ns: string, name: string): Promise<ControllerRevision | undefined> {
    return Promise.resolve(this.revisions.get(name));
  }
}

function req(object: Record<string, unknown>, resource = "virtualmachines"): AdmissionRequest {
  return {
    uid: "u1",
    kind: { group: "kubevirt.io", version: "v1", kind: "VirtualMachine" },
    resource: { group: "kubevirt.io", version: "v1", resource },
    operation: "CREATE",
    namespace: "default",
    name: "vm1",
    object,
  };
}

const disks = { devices: { disks: [{ name: "root", disk: {} }] } };
const volumes = [{ name: "root", containerDisk: { image: "x" } }];

function vmWith(domain: Record<string, unknown>, kind?: string): Record<string, unknown> {
  return {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachine",
    metadata: { name: "vm1", namespace: "default" },
    spec: {
      runStrategy: "Always",
      instancetype: { name: "small", ...(kind ? { kind } : {}) },
      template: { spec: { domain: { ...disks, ...domain }, volumes } },
    },
  };
}

function reader(): FakeReader {
  const r = new FakeReader();
  const small = { metadata: { name: "small" }, spec: { cpu: { guest: 2 }, memory: { guest: "256Mi" } } };
  r.objects.set("virtualmachineinstancetypes/small", small);
  r.objects.set("virtualmachineclusterinstancetypes/small", small);
  return r;
}

describe("VM validation with an instancetype (vms-admitter ApplyToVM)", () => {
  it("accepts a VM without memory whose instancetype gives it (the expanded template is validated)", async () => {
    expect(await validateVm("kubevirt", reader())(req(vmWith({}, "VirtualMachineInstancetype")))).toEqual({
      allowed: true,
    });
  });

  it.each([
    [
      { cpu: { sockets: 2 } },
      "VM field(s) spec.template.spec.domain.cpu.sockets conflicts with selected instance type",
    ],
    [
      { resources: { requests: { memory: "128Mi" } } },
      "VM field(s) spec.template.spec.domain.resources.requests.memory conflicts with selected instance type",
    ],
    [
      { memory: { guest: "1Gi" } },
      "VM field(s) spec.template.spec.domain.memory.guest conflicts with selected instance type",
    ],
  ])("refuses %j with KubeVirt's conflict message", async (domain, message) => {
    const result = await validateVm("kubevirt", reader())(req(vmWith(domain)));
    expect(result).toMatchObject({ allowed: false, code: 422, reason: "Invalid", message });
  });

  it("ignores a missing instancetype (virt-controller reports it); the template is validated as it is", async () => {
    const result = await validateVm(
      "kubevirt",
      new FakeReader(),
    )(req(vmWith({ resources: { requests: { memory: "128Mi" } } })));
    expect(result).toEqual({ allowed: true });
  });

  it("uses the ControllerRevision the VM status pins", async () => {
    const r = new FakeReader();
    r.revisions.set("rev1", {
      apiVersion: "apps/v1",
      kind: "ControllerRevision",
      metadata: { name: "rev1" },
      data: { spec: { cpu: { guest: 1 }, memory: { guest: "128Mi" }, schedulerName: "pinned" } },
    });
    const vm = vmWith({});
    vm.status = { instancetypeRef: { name: "small", controllerRevisionRef: { name: "rev1" } } };
    const spec = vm.spec as { template: { spec: Record<string, unknown> } };
    spec.template.spec.schedulerName = "mine";
    const result = await validateVm("kubevirt", r)(req(vm));
    expect(result).toMatchObject({
      allowed: false,
      message: "VM field(s) spec.template.spec.schedulerName conflicts with selected instance type",
    });
  });
});

describe("the common instancetypes and preferences at VM admission (hardware no backend provides)", () => {
  /** A reader serving the bundle the local cluster installs. */
  function bundleReader(): FakeReader {
    const r = new FakeReader();
    for (const o of commonInstancetypes()) {
      const plural =
        o.kind === "VirtualMachineClusterInstancetype"
          ? "virtualmachineclusterinstancetypes"
          : "virtualmachineclusterpreferences";
      r.objects.set(`${plural}/${o.metadata.name}`, o);
    }
    return r;
  }
  const T = "spec.template.spec.domain";
  const NO = "is not supported: this platform's machine backends (native VMM, QEMU TCG) provide no";
  const causesOf = (result: unknown): unknown[] => [...((result as { causes?: unknown[] }).causes ?? [])];
  const vmOf = (name: string): Record<string, unknown> => {
    const vm = vmWith({});
    (vm.spec as Record<string, unknown>).instancetype = { name };
    return vm;
  };

  it("refuses a VM of cx1.medium, naming each field and the instancetype that set it", async () => {
    const result = await validateVm("kubevirt", bundleReader())(req(vmOf("cx1.medium")));
    const by = '(set by VirtualMachineClusterInstancetype "cx1.medium")';
    expect(result).toMatchObject({ allowed: false, code: 422, reason: "Invalid" });
    expect(causesOf(result)).toEqual(
      expect.arrayContaining([
        {
          reason: "FieldValueNotSupported",
          message: `${T}.cpu.dedicatedCpuPlacement ${NO} dedicated CPU placement ${by}`,
          field: `${T}.cpu.dedicatedCpuPlacement`,
        },
        {
          reason: "FieldValueNotSupported",
          message: `${T}.cpu.isolateEmulatorThread ${NO} emulator-thread pinning ${by}`,
          field: `${T}.cpu.isolateEmulatorThread`,
        },
        {
          reason: "FieldValueNotSupported",
          message: `${T}.cpu.numa ${NO} guest NUMA passthrough ${by}`,
          field: `${T}.cpu.numa`,
        },
        {
          reason: "FieldValueNotSupported",
          message: `${T}.memory.hugepages ${NO} hugepage-backed guest memory ${by}`,
          field: `${T}.memory.hugepages`,
        },
      ]),
    );
    expect(causesOf(result)).toHaveLength(4);
  });

  it("refuses a VM of m1.large for its hugepages only", async () => {
    const result = await validateVm("kubevirt", bundleReader())(req(vmOf("m1.large")));
    expect(causesOf(result)).toEqual([
      {
        reason: "FieldValueNotSupported",
        message: `${T}.memory.hugepages ${NO} hugepage-backed guest memory (set by VirtualMachineClusterInstancetype "m1.large")`,
        field: `${T}.memory.hugepages`,
      },
    ]);
  });

  it("refuses the TPM the windows.11 preference asks for, naming the preference", async () => {
    const vm = vmOf("u1.large");
    (vm.spec as Record<string, unknown>).preference = { name: "windows.11" };
    const causes = causesOf(await validateVm("kubevirt", bundleReader())(req(vm)));
    expect(causes).toContainEqual({
      reason: "FieldValueNotSupported",
      message: `${T}.devices.tpm ${NO} an emulated TPM (set by VirtualMachineClusterPreference "windows.11")`,
      field: `${T}.devices.tpm`,
    });
  });

  it.each(["u1.medium", "u1.small"])("accepts a VM of %s with the fedora preference", async (name) => {
    const vm = vmOf(name);
    (vm.spec as Record<string, unknown>).preference = { name: "fedora" };
    expect(await validateVm("kubevirt", bundleReader())(req(vm))).toEqual({ allowed: true });
  });

  it.each(["u1.medium", "o1.nano"])("accepts a VM of %s", async (name) => {
    expect(await validateVm("kubevirt", bundleReader())(req(vmOf(name)))).toEqual({ allowed: true });
  });

  it("a VM that sets hugepages itself is refused without naming its instancetype", async () => {
    const vm = vmWith({ memory: { hugepages: { pageSize: "2Mi" } } });
    (vm.spec as Record<string, unknown>).instancetype = { name: "u1.medium" };
    const causes = causesOf(await validateVm("kubevirt", bundleReader())(req(vm)));
    expect(causes).toEqual([
      {
        reason: "FieldValueNotSupported",
        message: `${T}.memory.hugepages ${NO} hugepage-backed guest memory`,
        field: `${T}.memory.hugepages`,
      },
    ]);
  });
});

describe("instancetype and preference webhooks", () => {
  const routes = webhookRoutes(new FakeCluster(), "kubevirt");

  it("refuses overcommitPercent above 100 with KubeVirt's message", async () => {
    const obj = {
      metadata: { name: "x" },
      spec: { cpu: { guest: 1 }, memory: { guest: "1Gi", overcommitPercent: 101 } },
    };
    const result = await routes["/virtualmachineclusterinstancetypes-validate"](
      req(obj, "virtualmachineclusterinstancetypes"),
    );
    expect(result).toMatchObject({
      allowed: false,
      message: "spec.memory.overcommitPercent '101': must be in range between 0 and 100.",
    });
  });

  it("warns about a deprecated topology", async () => {
    const obj = { metadata: { name: "p" }, spec: { cpu: { preferredCPUTopology: "preferThreads" } } };
    const result = await routes["/virtualmachinepreferences-validate"](req(obj, "virtualmachinepreferences"));
    expect(result).toEqual({
      allowed: true,
      warnings: [
        "PreferredCPUTopology preferThreads is deprecated for removal in a future release, please use threads instead",
      ],
    });
  });
});

describe("preference requirements at VM admission (checker.Check)", () => {
  it("refuses an instancetype smaller than the preference requires", async () => {
    const r = reader();
    r.objects.set("virtualmachineclusterpreferences/big", {
      metadata: { name: "big" },
      spec: { requirements: { cpu: { guest: 4 } } },
    });
    const vm = vmWith({}, "VirtualMachineInstancetype");
    (vm.spec as Record<string, unknown>).preference = { name: "big" };
    const result = await validateVm("kubevirt", r)(req(vm));
    expect(result).toMatchObject({
      allowed: false,
      message:
        "failure checking preference requirements: insufficient CPU resources of 2 vCPU provided by instance type, preference requires 4 vCPU",
    });
  });
});

describe("inferFromVolume at VM mutation (pkg/instancetype/infer)", () => {
  function inferringReader(labels: Record<string, string> | undefined): InstancetypeReader {
    const r = reader();
    return {
      get: (m) => r.get(m),
      getControllerRevision: () => Promise.resolve(undefined),
      getPvc: (_ns, name) => Promise.resolve(name === "root-claim" && labels ? { metadata: { labels } } : undefined),
    };
  }

  function inferVm(policy?: string): Record<string, unknown> {
    return {
      apiVersion: "kubevirt.io/v1",
      kind: "VirtualMachine",
      metadata: { name: "vm1", namespace: "default" },
      spec: {
        runStrategy: "Always",
        instancetype: { inferFromVolume: "root", ...(policy ? { inferFromVolumeFailurePolicy: policy } : {}) },
        template: {
          spec: {
            domain: { devices: {}, memory: { guest: "512Mi" } },
            volumes: [{ name: "root", persistentVolumeClaim: { claimName: "root-claim" } }],
          },
        },
      },
    };
  }

  it("takes the instancetype from the claim's default-instancetype labels", async () => {
    const r = inferringReader({
      "instancetype.kubevirt.io/default-instancetype": "u1.nano",
      "instancetype.kubevirt.io/default-instancetype-kind": "VirtualMachineClusterInstancetype",
    });
    const result = await mutateVmWith(r)(req(inferVm()));
    expect(result.allowed).toBe(true);
    const patch = (result as { patch?: { path: string; value: { instancetype?: unknown } }[] }).patch ?? [];
    expect(patch.find((p) => p.path === "/spec")?.value.instancetype).toEqual({
      name: "u1.nano",
      kind: "VirtualMachineClusterInstancetype",
    });
  });

  it("a claim without the label refuses the VM (400) unless the failure policy is Ignore", async () => {
    const r = inferringReader({});
    expect(await mutateVmWith(r)(req(inferVm()))).toEqual({
      allowed: false,
      code: 400,
      message: "unable to find required instancetype.kubevirt.io/default-instancetype label on the volume",
    });
    const ignored = await mutateVmWith(r)(req(inferVm("Ignore")));
    const patch = (ignored as { patch?: { path: string; value: { instancetype?: unknown } }[] }).patch ?? [];
    expect(ignored.allowed).toBe(true);
    expect(patch.find((p) => p.path === "/spec")?.value.instancetype).toBeUndefined();
  });

  it("a missing claim is not ignorable", async () => {
    const result = await mutateVmWith(inferringReader(undefined))(req(inferVm("Ignore")));
    expect(result).toEqual({ allowed: false, code: 400, message: 'persistentvolumeclaims "root-claim" not found' });
  });
});
