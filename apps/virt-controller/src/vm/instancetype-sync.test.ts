import { objectKey, type VirtualMachine, type VirtualMachineInstance } from "@kvt/api";
import { Expectations, KUBEVIRT_V1, type KubeObject } from "@kvt/kube";
import { FakeApi, FakeRecorder, fakeStore, newVm, reconcileWithGuard, withRunStrategy } from "@kvt/testing";
import { describe, expect, it } from "vitest";
import { CONTROLLER_REVISIONS, InstancetypeSync, instancetypeResource } from "./instancetype-sync.ts";
import { VmController } from "./vm-controller.ts";

const IT = instancetypeResource({
  kind: "VirtualMachineInstancetype",
  plural: "virtualmachineinstancetypes",
  namespaced: true,
  name: "",
});
const CPREF = instancetypeResource({
  kind: "VirtualMachineClusterPreference",
  plural: "virtualmachineclusterpreferences",
  namespaced: false,
  name: "",
});

function setup(vm: VirtualMachine, seedInstancetype = true) {
  const api = new FakeApi();
  if (seedInstancetype) {
    api.seed(IT, {
      apiVersion: "instancetype.kubevirt.io/v1beta1",
      kind: "VirtualMachineInstancetype",
      metadata: { name: "small", namespace: "default", uid: "it-uid", generation: 1 },
      spec: { cpu: { guest: 2 }, memory: { guest: "256Mi" } },
    } as KubeObject);
    api.seed(CPREF, {
      metadata: { name: "linux", uid: "p-uid", generation: 2 },
      spec: { devices: { preferredDiskBus: "virtio", preferredInterfaceModel: "virtio" } },
    } as KubeObject);
  }
  const storedVm = api.seed(KUBEVIRT_V1.virtualMachines, vm);
  const vms = fakeStore([storedVm]);
  const vmis = fakeStore<VirtualMachineInstance>([]);
  const vmClient = api.client<VirtualMachine>(KUBEVIRT_V1.virtualMachines);
  const controller = new VmController({
    vms,
    vmis,
    vmClient,
    vmiClient: api.client(KUBEVIRT_V1.virtualMachineInstances),
    recorder: new FakeRecorder(),
    expectations: new Expectations(),
    now: () => Date.parse("2026-01-01T00:00:00Z"),
    instancetypes: new InstancetypeSync({ clientFor: (t) => api.client(t), vmClient }),
  });
  const run = () =>
    reconcileWithGuard(controller, objectKey("default", "testvm"), [vms, vmis]).catch((e: unknown) => e);
  const stored = () => api.stored<VirtualMachine>(KUBEVIRT_V1.virtualMachines, "default", "testvm")!;
  const vmi = () => api.stored<VirtualMachineInstance>(KUBEVIRT_V1.virtualMachineInstances, "default", "testvm");
  return { api, run, stored, vmi };
}

function vmWithInstancetype(...domain: ((vm: VirtualMachine) => void)[]): VirtualMachine {
  const vm = newVm("testvm", withRunStrategy("Always"));
  vm.metadata!.uid = "vm-uid";
  vm.spec.instancetype = { name: "small", kind: "VirtualMachineInstancetype" };
  vm.spec.preference = { name: "linux" };
  const d = vm.spec.template.spec!.domain as Record<string, unknown>;
  delete d.resources;
  delete d.cpu;
  delete d.memory;
  for (const f of domain) f(vm);
  return vm;
}

describe("VmController with instancetypes (pkg/instancetype/controller/vm)", () => {
  it("pins both in ControllerRevisions, records them in the status, and expands the VMI", async () => {
    const { api, run, stored, vmi } = setup(vmWithInstancetype());
    await run();
    const revisions = api.all<KubeObject & { data?: { kind?: string } }>(CONTROLLER_REVISIONS);
    expect(revisions.map((r) => r.metadata?.name).sort()).toEqual([
      "testvm-linux-v1beta1-p-uid-2",
      "testvm-small-v1beta1-it-uid-1",
    ]);
    expect(stored().status?.instancetypeRef).toEqual({
      name: "small",
      kind: "VirtualMachineInstancetype",
      controllerRevisionRef: { name: "testvm-small-v1beta1-it-uid-1" },
    });
    expect(stored().status?.preferenceRef).toEqual({
      name: "linux",
      controllerRevisionRef: { name: "testvm-linux-v1beta1-p-uid-2" },
    });
    const created = vmi()!;
    expect(created.spec.domain.cpu).toMatchObject({ sockets: 2, cores: 1, threads: 1 });
    expect(created.spec.domain.memory).toMatchObject({ guest: "256Mi" });
    expect(created.metadata?.annotations).toMatchObject({
      "kubevirt.io/instancetype-name": "small",
      "kubevirt.io/cluster-preference-name": "linux",
    });
  });

  it("later syncs read the pinned revision, not the edited instancetype", async () => {
    const vm = vmWithInstancetype();
    vm.status = {
      instancetypeRef: {
        name: "small",
        kind: "VirtualMachineInstancetype",
        controllerRevisionRef: { name: "rev-old" },
      },
    };
    vm.spec.preference = undefined;
    const { api, run, vmi } = setup(vm);
    api.seed(CONTROLLER_REVISIONS, {
      metadata: { name: "rev-old", namespace: "default" },
      data: { spec: { cpu: { guest: 4 }, memory: { guest: "1Gi" } } },
    } as KubeObject);
    await run();
    expect(vmi()!.spec.domain.cpu).toMatchObject({ sockets: 4 });
    expect(vmi()!.spec.domain.memory).toMatchObject({ guest: "1Gi" });
  });

  it("reads a pinned revision once: later reconciles take its spec from the cache", async () => {
    const vm = vmWithInstancetype();
    vm.status = {
      instancetypeRef: {
        name: "small",
        kind: "VirtualMachineInstancetype",
        controllerRevisionRef: { name: "rev-old" },
      },
    };
    vm.spec.preference = undefined;
    vm.spec.runStrategy = "Halted";
    const { api, run } = setup(vm);
    api.seed(CONTROLLER_REVISIONS, {
      metadata: { name: "rev-old", namespace: "default" },
      data: { spec: { cpu: { guest: 4 }, memory: { guest: "1Gi" } } },
    } as KubeObject);
    await run();
    await run();
    const gets = api.actions.filter((a) => a.verb === "get" && a.resource === "controllerrevisions");
    expect(gets).toHaveLength(1);
  });

  it("reports a missing instancetype as KubeVirt does: Failure condition FailedFindInstancetype, no VMI", async () => {
    const { run, stored, vmi } = setup(vmWithInstancetype(), false);
    const error = await run();
    expect(error).toBeInstanceOf(Error);
    const failure = stored().status?.conditions?.find((c) => c.type === "Failure");
    expect(failure).toMatchObject({ status: "True", reason: "FailedFindInstancetype" });
    expect(failure?.message).toContain('"small" not found');
    expect(vmi()).toBeUndefined();
  });

  it("refuses to pin an instancetype the template conflicts with", async () => {
    const { run, stored, vmi } = setup(
      vmWithInstancetype((vm) => {
        vm.spec.template.spec!.domain.cpu = { sockets: 1 };
      }),
    );
    await run();
    const failure = stored().status?.conditions?.find((c) => c.type === "Failure");
    expect(failure?.reason).toBe("FailedCreate");
    expect(failure?.message).toBe(
      "error encountered while storing instancetype.kubevirt.io controllerRevisions: VM field(s) spec.template.spec.domain.cpu.sockets conflicts with selected instance type",
    );
    expect(vmi()).toBeUndefined();
  });
});
