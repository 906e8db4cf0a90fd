import { objectKey, type VirtualMachine, type VirtualMachineInstance } from "@kvt/api";
import { Expectations, KUBEVIRT_V1 } from "@kvt/kube";
import {
  FakeApi,
  FakeRecorder,
  fakeStore,
  newVm,
  newVmi,
  type Option,
  ownedBy,
  reconcileWithGuard,
  withPhase,
  withRunning,
  withRunStrategy,
} from "@kvt/testing";
import { describe, expect, it } from "vitest";
import { VmController } from "./vm-controller.ts";
import { firmwareUuid } from "./vmi-template.ts";

function setup(vm: VirtualMachine, vmi?: VirtualMachineInstance) {
  const api = new FakeApi();
  const storedVm = api.seed(KUBEVIRT_V1.virtualMachines, vm);
  if (vmi) api.seed(KUBEVIRT_V1.virtualMachineInstances, vmi);
  const vms = fakeStore([storedVm]);
  const vmis = fakeStore(
    vmi
      ? [api.stored<VirtualMachineInstance>(KUBEVIRT_V1.virtualMachineInstances, "default", vmi.metadata!.name!)!]
      : [],
  );
  const recorder = new FakeRecorder();
  const expectations = new Expectations();
  const controller = new VmController({
    vms,
    vmis,
    vmClient: api.client(KUBEVIRT_V1.virtualMachines),
    vmiClient: api.client(KUBEVIRT_V1.virtualMachineInstances),
    recorder,
    expectations,
    now: () => Date.parse("2026-01-01T00:00:00Z"),
  });
  const run = () => reconcileWithGuard(controller, objectKey("default", vm.metadata!.name!), [vms, vmis]);
  const vmStatus = () => api.stored<VirtualMachine>(KUBEVIRT_V1.virtualMachines, "default", vm.metadata!.name!)!.status;
  return { api, recorder, expectations, run, vmStatus };
}

const withRequests =
  (...reqs: { action: "Start" | "Stop"; uid?: string }[]): Option<VirtualMachine> =>
  (vm) => {
    vm.status = { ...vm.status, stateChangeRequests: reqs };
  };
const ownedVmi = (vm: VirtualMachine, ...opts: Option<VirtualMachineInstance>[]) =>
  newVmi(vm.metadata!.name, ownedBy({ ...vm }), ...opts);

describe("VmController run strategies", () => {
  it.each([
    ["Always", withRunStrategy("Always"), ["create virtualmachineinstances"]],
    ["running: true", withRunning(true), ["create virtualmachineinstances"]],
    ["RerunOnFailure (new VM)", withRunStrategy("RerunOnFailure"), ["create virtualmachineinstances"]],
    ["Once", withRunStrategy("Once"), ["create virtualmachineinstances"]],
    ["Manual", withRunStrategy("Manual"), []],
    ["Halted", withRunStrategy("Halted"), []],
    ["running: false", withRunning(false), []],
    [
      "Manual with a Start request",
      (vm: VirtualMachine) => {
        withRunStrategy("Manual")(vm);
        withRequests({ action: "Start" })(vm);
      },
      ["create virtualmachineinstances"],
    ],
  ])("with no VMI, %s -> %j", async (_name, opt, creates) => {
    const { api, run } = setup(newVm("vm1", opt));
    await run();
    expect(api.summary().filter((a) => a.startsWith("create"))).toEqual(creates);
  });

  it("creates the VMI from the template with the VM as controller owner and a stable firmware UUID", async () => {
    const vm = newVm("vm1");
    delete vm.spec.template.spec!.domain.firmware;
    const { api, recorder, expectations, run, vmStatus } = setup(vm);
    await run();
    const created = api.writes()[0].body as VirtualMachineInstance;
    expect(created.metadata?.ownerReferences).toEqual([
      expect.objectContaining({ kind: "VirtualMachine", name: "vm1", uid: vm.metadata!.uid, controller: true }),
    ]);
    expect(created.metadata?.labels?.["kubevirt.io/vm"]).toBe("vm1");
    expect(created.spec.domain.firmware?.uuid).toBe(firmwareUuid(vm));
    expect(firmwareUuid(newVm("vm1"))).not.toBe(created.spec.domain.firmware?.uuid);
    expect(recorder.reasons()).toEqual(["SuccessfulCreate"]);
    expect(expectations.satisfied(objectKey("default", "vm1"))).toBe(false);
    // The status waits for the reconcile that sees the new VMI.
    expect(vmStatus()).toBeUndefined();
  });

  it.each([
    ["Always, VMI Failed: delete to restart", withRunStrategy("Always"), "Failed", true],
    ["Always, VMI Succeeded: delete to restart", withRunStrategy("Always"), "Succeeded", true],
    ["Once, VMI Failed: keep", withRunStrategy("Once"), "Failed", false],
    ["RerunOnFailure, VMI Succeeded: delete, no restart", withRunStrategy("RerunOnFailure"), "Succeeded", true],
    ["Halted, VMI Running: delete", withRunStrategy("Halted"), "Running", true],
    ["Manual, VMI Running: keep", withRunStrategy("Manual"), "Running", false],
    ["Always, VMI Running: keep", withRunStrategy("Always"), "Running", false],
  ] as const)("%s", async (_name, opt, phase, deletes) => {
    const vm = newVm("vm1", opt);
    const { api, run } = setup(vm, ownedVmi(vm, withPhase(phase)));
    await run();
    expect(api.summary().includes("delete virtualmachineinstances default/vm1")).toBe(deletes);
  });

  it("Halted with a running VMI: deletes it and reports Stopping until it is gone", async () => {
    const vm = newVm("vm1", withRunStrategy("Halted"));
    const { api, run, vmStatus } = setup(vm, ownedVmi(vm, withPhase("Running")));
    await run();
    expect(api.summary()).toContain("delete virtualmachineinstances default/vm1");
    expect(vmStatus()?.printableStatus).toBe("Stopping");
  });

  it("RerunOnFailure: a Failed VMI is deleted and a Start request queued so it reruns", async () => {
    const vm = newVm("vm1", withRunStrategy("RerunOnFailure"));
    const { run, vmStatus } = setup(vm, ownedVmi(vm, withPhase("Failed")));
    await run();
    expect(vmStatus()?.stateChangeRequests).toEqual([{ action: "Start" }]);
  });

  it("a Stop request for the VMI's uid deletes it; once gone the request is dropped", async () => {
    const vm = newVm("vm1", withRunStrategy("Manual"));
    const vmi = ownedVmi(vm, withPhase("Running"));
    withRequests({ action: "Stop", uid: vmi.metadata!.uid })(vm);
    const { api, run, vmStatus } = setup(vm, vmi);
    await run();
    expect(api.summary()).toContain("delete virtualmachineinstances default/vm1");
    expect(vmStatus()?.printableStatus).toBe("Stopping");
    const after = setup({ ...vm, status: vmStatus() });
    await after.run();
    expect(after.vmStatus()?.stateChangeRequests).toBeUndefined();
    expect(after.api.summary().filter((a) => a.startsWith("create"))).toEqual([]);
  });

  it("a Start request with data.paused=true creates the VMI with startStrategy Paused", async () => {
    const vm = newVm("vm1", withRunStrategy("Manual"), (v) => {
      v.status = { stateChangeRequests: [{ action: "Start", data: { paused: "true" } }] };
    });
    const { api, run } = setup(vm);
    await run();
    expect((api.writes()[0].body as VirtualMachineInstance).spec.startStrategy).toBe("Paused");
  });

  it("Halted with a Start request flips spec.runStrategy to Always", async () => {
    const { api, run } = setup(newVm("vm1", withRunStrategy("Halted"), withRequests({ action: "Start" })));
    await run();
    const patch = api.writes().find((a) => a.resource === "virtualmachines")!;
    expect(patch.body).toContainEqual({ op: "add", path: "/spec/runStrategy", value: "Always" });
  });

  it("never creates a new VMI while the old one is still terminating (fencing)", async () => {
    const vm = newVm("vm1");
    const { api, run } = setup(
      vm,
      ownedVmi(vm, withPhase("Failed"), (v) => (v.metadata!.deletionTimestamp = new Date().toISOString())),
    );
    await run();
    expect(api.summary().filter((a) => !a.includes("/status"))).toEqual([]);
  });

  it("adopts an orphaned VMI of the same name instead of creating one", async () => {
    const vm = newVm("vm1");
    const { api, run, vmStatus } = setup(vm, newVmi("vm1", withPhase("Running")));
    await run();
    const adopt = api.writes()[0];
    expect(adopt.resource).toBe("virtualmachineinstances");
    expect(JSON.stringify(adopt.body)).toContain(vm.metadata!.uid!);
    expect(api.summary().filter((a) => a.startsWith("create"))).toEqual([]);
    expect(vmStatus()?.created).toBe(true);
    expect(vmStatus()?.printableStatus).toBe("Running");
  });

  it("writes status created/ready/printableStatus/runStrategy from a running, ready VMI", async () => {
    const vm = newVm("vm1");
    const vmi = ownedVmi(vm, withPhase("Running"), (v) => {
      v.status!.conditions = [{ type: "Ready", status: "True" }];
    });
    const { run, vmStatus } = setup(vm, vmi);
    await run();
    expect(vmStatus()).toMatchObject({ created: true, ready: true, printableStatus: "Running", runStrategy: "Always" });
    expect(vmStatus()?.conditions).toContainEqual(expect.objectContaining({ type: "Ready", status: "True" }));
  });

  it("records a start failure for a VMI that failed without running, and backs off before the next create", async () => {
    const vm = newVm("vm1");
    const vmi = ownedVmi(vm, withPhase("Failed"));
    const first = setup(vm, vmi);
    await first.run();
    const status = first.vmStatus()!;
    expect(status.startFailure).toMatchObject({ consecutiveFailCount: 1, lastFailedVMIUID: vmi.metadata!.uid });
    const second = setup({ ...vm, status });
    const result = await second.run();
    expect(second.api.summary().filter((a) => a.startsWith("create"))).toEqual([]);
    expect(result.requeueAfterMs).toBeGreaterThan(0);
    expect(second.vmStatus()?.printableStatus).toBe("CrashLoopBackOff");
  });

  it("sets RestartRequired when the template changed after the VMI was created", async () => {
    const vm = newVm("vm1");
    const vmi = ownedVmi(vm, withPhase("Running"), (v) => {
      v.metadata!.annotations = { "kubevirt.io/vm-template-hash": "0000000000000000" };
    });
    const { run, vmStatus } = setup(vm, vmi);
    await run();
    expect(vmStatus()?.conditions).toContainEqual(expect.objectContaining({ type: "RestartRequired", status: "True" }));
  });

  it("reports FailedCreate as a Failure condition and an event, and throws for a retry", async () => {
    const { api, recorder, run, vmStatus } = setup(newVm("vm1"));
    api.failOn("create", "virtualmachineinstances", new Error("quota"));
    await expect(run()).rejects.toThrow(/quota/);
    expect(recorder.reasons()).toEqual(["FailedCreate"]);
    expect(vmStatus()?.conditions).toContainEqual(
      expect.objectContaining({ type: "Failure", status: "True", reason: "FailedCreate" }),
    );
  });
});

describe("VmController deletion", () => {
  it("a VM deleted with --cascade=orphan leaves its VMI alone; a normal deletion stops it", async () => {
    const orphaning = newVm("vm1", (vm) => {
      vm.metadata!.deletionTimestamp = new Date().toISOString();
      vm.metadata!.finalizers = ["orphan"];
    });
    const a = setup(orphaning, ownedVmi(orphaning, withPhase("Running")));
    await a.run();
    expect(a.api.summary().filter((s) => s.startsWith("delete"))).toEqual([]);
    const deleting = newVm("vm1", (vm) => {
      vm.metadata!.deletionTimestamp = new Date().toISOString();
    });
    const b = setup(deleting, ownedVmi(deleting, withPhase("Running")));
    await b.run();
    expect(b.api.summary()).toContain("delete virtualmachineinstances default/vm1");
    expect(b.vmStatus()?.printableStatus).toBe("Terminating");
  });
});
