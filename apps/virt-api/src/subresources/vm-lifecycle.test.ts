import type { RunStrategy, VmiPhase } from "@kvt/api";
import { ApiError, badRequest } from "@kvt/kube";
import { describe, expect, it } from "vitest";
import { FakeCluster, newVm, newVmi } from "../fake/fake-cluster.ts";
import type { ClusterClient } from "../kube/cluster-client.ts";
import { migrateVm, restartVm, startVm, stopVm, type VmTarget } from "./vm-lifecycle.ts";

function target(cluster: FakeCluster, name = "vm1") {
  return { client: cluster, namespace: "default", name };
}

async function statusOf(p: Promise<unknown>): Promise<{ code: number; message: string }> {
  try {
    await p;
  } catch (error) {
    expect(error).toBeInstanceOf(ApiError);
    return { code: (error as ApiError).code, message: (error as ApiError).message };
  }
  throw new Error("expected a refusal");
}

describe("start", () => {
  it("start() on a Halted VM flips spec.runStrategy to Always behind a test of the old value", async () => {
    const cluster = new FakeCluster().addVm(newVm("vm1", { runStrategy: "Halted" }));
    await startVm(target(cluster), {});
    expect(cluster.writes).toEqual([
      {
        verb: "patchVm",
        name: "vm1",
        dryRun: false,
        body: [
          { op: "test", path: "/spec/runStrategy", value: "Halted" },
          { op: "replace", path: "/spec/runStrategy", value: "Always" },
        ],
      },
    ]);
    expect(cluster.vms.get("default/vm1")?.spec.runStrategy).toBe("Always");
  });

  it("start() with legacy running:false patches spec.running", async () => {
    const cluster = new FakeCluster().addVm(newVm("vm1", { running: false }));
    await startVm(target(cluster), {});
    expect(cluster.vms.get("default/vm1")?.spec.running).toBe(true);
  });

  it("start --paused on a Halted VM adds a Start request with data.paused=true", async () => {
    const cluster = new FakeCluster().addVm(newVm("vm1", { runStrategy: "Halted" }));
    await startVm(target(cluster), { paused: true });
    expect(cluster.vms.get("default/vm1")?.status?.stateChangeRequests).toEqual([
      { action: "Start", data: { paused: "true" } },
    ]);
  });

  it("start --dry-run sends the patch with dryRun and changes nothing", async () => {
    const cluster = new FakeCluster().addVm(newVm("vm1", { runStrategy: "Halted" }));
    await startVm(target(cluster), { dryRun: ["All"] });
    expect(cluster.writes[0]?.dryRun).toBe(true);
    expect(cluster.vms.get("default/vm1")?.spec.runStrategy).toBe("Halted");
  });

  it("start on Manual appends a Start request; on a Succeeded VMI it asks Stop(uid) then Start", async () => {
    const cluster = new FakeCluster()
      .addVm(newVm("vm1", { runStrategy: "Manual" }, { created: false }))
      .addVmi(newVmi("vm1", "Succeeded"));
    await startVm(target(cluster), {});
    expect(cluster.vms.get("default/vm1")?.status?.stateChangeRequests).toEqual([
      { action: "Stop", uid: "uid-vmi-vm1" },
      { action: "Start" },
    ]);
  });

  it.each<[RunStrategy, VmiPhase | undefined, number, string]>([
    [
      "Always",
      undefined,
      409,
      'Operation cannot be fulfilled on virtualmachine.kubevirt.io "vm1": Always does not support manual start requests',
    ],
    ["Once", undefined, 409, "Once does not support manual start requests"],
    [
      "Halted",
      "Running",
      409,
      'Operation cannot be fulfilled on virtualmachine.kubevirt.io "vm1": VM is already running',
    ],
    ["RerunOnFailure", "Failed", 409, "RerunOnFailure does not support starting VM from failed state"],
  ])("start on %s with VMI %s is refused with %i", async (strategy, phase, code, message) => {
    const cluster = new FakeCluster().addVm(newVm("vm1", { runStrategy: strategy }));
    if (phase) cluster.addVmi(newVmi("vm1", phase));
    const status = await statusOf(startVm(target(cluster), {}));
    expect(status.code).toBe(code);
    expect(status.message).toContain(message);
    expect(cluster.writes).toEqual([]);
  });

  it("start on a missing VM is 404 virtualmachine.kubevirt.io not found", async () => {
    const status = await statusOf(startVm(target(new FakeCluster()), {}));
    expect(status).toEqual({ code: 404, message: 'virtualmachine.kubevirt.io "vm1" not found' });
  });

  it("start when ManualRecoveryRequired is True is 409", async () => {
    const vm = newVm(
      "vm1",
      { runStrategy: "Halted" },
      { conditions: [{ type: "ManualRecoveryRequired", status: "True" }] },
    );
    const status = await statusOf(startVm(target(new FakeCluster().addVm(vm)), {}));
    expect(status.code).toBe(409);
    expect(status.message).toContain("VM recovery required");
  });

  it("a second request while one is pending is 500 stop/start already underway", async () => {
    const vm = newVm("vm1", { runStrategy: "Manual" }, { stateChangeRequests: [{ action: "Start" }] });
    const status = await statusOf(startVm(target(new FakeCluster().addVm(vm)), {}));
    expect(status).toEqual({
      code: 500,
      message: "Internal error occurred: unable to complete request: stop/start already underway",
    });
  });

  it("a missing stateChangeRequests member is added without a test (portable to strict RFC 6902 servers)", async () => {
    const cluster = new FakeCluster().addVm(newVm("vm1", { runStrategy: "Manual" }, { created: false }));
    await startVm(target(cluster), {});
    expect(cluster.writes[0]?.body).toEqual([
      { op: "add", path: "/status/stateChangeRequests", value: [{ action: "Start" }] },
    ]);
  });

  it("a lost test race (the API server's 422) becomes 409", async () => {
    const cluster = new FakeCluster().addVm(newVm("vm1", { runStrategy: "Halted" }));
    // another writer changed the strategy between our read and our patch
    const vm = cluster.vms.get("default/vm1");
    const { getVm } = cluster;
    cluster.getVm = async (ns, name) => {
      const seen = await getVm.call(cluster, ns, name);
      if (vm) vm.spec.runStrategy = "Manual";
      return seen;
    };
    const status = await statusOf(startVm(target(cluster), {}));
    expect(status.code).toBe(409);
  });
});

describe("stop", () => {
  it("stop on Always patches runStrategy to Halted", async () => {
    const cluster = new FakeCluster().addVm(newVm("vm1", { runStrategy: "Always" })).addVmi(newVmi("vm1", "Running"));
    await stopVm(target(cluster), {});
    expect(cluster.vms.get("default/vm1")?.spec.runStrategy).toBe("Halted");
  });

  it("stop on Manual with a running VMI appends Stop(uid)", async () => {
    const cluster = new FakeCluster()
      .addVm(newVm("vm1", { runStrategy: "Manual" }, { created: true }))
      .addVmi(newVmi("vm1", "Running"));
    await stopVm(target(cluster), {});
    expect(cluster.vms.get("default/vm1")?.status?.stateChangeRequests).toEqual([
      { action: "Stop", uid: "uid-vmi-vm1" },
    ]);
  });

  it.each<[RunStrategy]>([["Manual"], ["RerunOnFailure"], ["Halted"]])(
    "stop on %s without a VMI is 409 VM is not running",
    async (s) => {
      const status = await statusOf(stopVm(target(new FakeCluster().addVm(newVm("vm1", { runStrategy: s }))), {}));
      expect(status.code).toBe(409);
      expect(status.message).toMatch(/: VM is not running$/);
    },
  );

  it("stop --grace-period 0 --force patches the VMI grace period first", async () => {
    const cluster = new FakeCluster()
      .addVm(newVm("vm1", { runStrategy: "Always" }))
      .addVmi(newVmi("vm1", "Running", [], { terminationGracePeriodSeconds: 30 }));
    await stopVm(target(cluster), { gracePeriod: 0 });
    expect(cluster.writes.map((w) => w.verb)).toEqual(["patchVmi", "patchVm"]);
    expect(cluster.vmis.get("default/vm1")?.spec.terminationGracePeriodSeconds).toBe(0);
  });

  it("Halted with a still-running VMI accepts only a shorter grace period", async () => {
    const cluster = new FakeCluster()
      .addVm(newVm("vm1", { runStrategy: "Halted" }, { created: true }))
      .addVmi(newVmi("vm1", "Running", [], { terminationGracePeriodSeconds: 30 }));
    const refused = await statusOf(stopVm(target(cluster), {}));
    expect(refused.message).toContain("Halted only supports manual stop requests with a shorter graceperiod");
    await stopVm(target(cluster), { gracePeriod: 0 });
    expect(cluster.vms.get("default/vm1")?.status?.stateChangeRequests?.[0]?.action).toBe("Stop");
  });
});

describe("the VMI grace-period patch of a forced stop/restart", () => {
  /** The caller as the VMI update webhook sees a user: VM writes pass, a VMI spec patch is refused. */
  function asUser(cluster: FakeCluster): ClusterClient {
    return {
      getVm: (ns, n) => cluster.getVm(ns, n),
      getVmi: (ns, n) => cluster.getVmi(ns, n),
      patchVm: (ns, n, p, d) => cluster.patchVm(ns, n, p, d),
      patchVmStatus: (ns, n, p, d) => cluster.patchVmStatus(ns, n, p, d),
      patchVmi: () =>
        Promise.reject(
          badRequest(
            'admission webhook "virtualmachineinstances-update-validator.kubevirt.io" denied the request: update of VMI object is restricted',
          ),
        ),
      createVmim: (ns, v, d) => cluster.createVmim(ns, v, d),
      listVmims: (ns, l) => cluster.listVmims(ns, l),
      listPods: (ns, l, f) => cluster.listPods(ns, l, f),
      listVmiPresets: (ns) => cluster.listVmiPresets(ns),
    };
  }

  it.each([
    ["stop --force --grace-period=0", (t: VmTarget) => stopVm(t, { gracePeriod: 0 }), 0, ["patchVmi", "patchVm"]],
    [
      "restart --force --grace-period=0",
      (t: VmTarget) => restartVm(t, { gracePeriodSeconds: 0 }),
      1,
      ["patchVmi", "patchVmStatus"],
    ],
  ])("%s patches the VMI as virt-api's service account and the VM as the caller", async (_, act, grace, verbs) => {
    const cluster = new FakeCluster()
      .addVm(newVm("vm1", { runStrategy: "Always" }, { created: true }))
      .addVmi(newVmi("vm1", "Running", [], { terminationGracePeriodSeconds: 30 }));
    // As the caller alone it cannot work: the webhook refuses the VMI patch and nothing is written.
    const refused = await statusOf(act({ client: asUser(cluster), namespace: "default", name: "vm1" }));
    expect(refused.message).toContain("update of VMI object is restricted");
    expect(cluster.writes).toEqual([]);
    await act({ client: asUser(cluster), internal: cluster, namespace: "default", name: "vm1" });
    expect(cluster.writes.map((w) => w.verb)).toEqual(verbs);
    expect(cluster.vmis.get("default/vm1")?.spec.terminationGracePeriodSeconds).toBe(grace);
  });
});

describe("restart", () => {
  it("restart appends Stop(uid) and Start", async () => {
    const cluster = new FakeCluster()
      .addVm(newVm("vm1", { runStrategy: "Always" }, { created: true }))
      .addVmi(newVmi("vm1", "Running"));
    await restartVm(target(cluster), {});
    expect(cluster.vms.get("default/vm1")?.status?.stateChangeRequests).toEqual([
      { action: "Stop", uid: "uid-vmi-vm1" },
      { action: "Start" },
    ]);
  });

  it("restart --force --grace-period=0 sets the VMI grace period to 1 first", async () => {
    const cluster = new FakeCluster()
      .addVm(newVm("vm1", { runStrategy: "Always" }, { created: true }))
      .addVmi(newVmi("vm1", "Running", [], { terminationGracePeriodSeconds: 30 }));
    await restartVm(target(cluster), { gracePeriodSeconds: 0 });
    expect(cluster.vmis.get("default/vm1")?.spec.terminationGracePeriodSeconds).toBe(1);
  });

  it.each<[{ gracePeriodSeconds?: number }, RunStrategy, boolean, number, string]>([
    [{ gracePeriodSeconds: 5 }, "Always", true, 400, "For force restart, only gracePeriod=0 is supported for now"],
    [{ gracePeriodSeconds: -1 }, "Always", true, 400, "gracePeriod has to be greater or equal to 0"],
    [{}, "Halted", true, 409, "RunStategy Halted does not support manual restart requests"],
    [{}, "Once", true, 409, "RunStategy Once does not support manual restart requests"],
    [{}, "Always", false, 409, "VM is not running: Halted"],
  ])("restart %j on %s (VMI: %s) is refused with %i", async (opts, strategy, withVmi, code, message) => {
    const cluster = new FakeCluster().addVm(newVm("vm1", { runStrategy: strategy }));
    if (withVmi) cluster.addVmi(newVmi("vm1", "Running"));
    const status = await statusOf(restartVm(target(cluster), opts));
    expect(status.code).toBe(code);
    expect(status.message).toContain(message);
  });
});

describe("migrate", () => {
  it("migrate creates a VMIM with generateName kubevirt-migrate-vm- and the added node selector", async () => {
    const cluster = new FakeCluster().addVm(newVm("vm1", { runStrategy: "Always" })).addVmi(newVmi("vm1", "Running"));
    await migrateVm(target(cluster), { addedNodeSelector: { zone: "b" } }, { "kubevirt.io/traceparent": "00-a-b-01" });
    expect(cluster.vmims).toHaveLength(1);
    expect(cluster.vmims[0]?.metadata?.generateName).toBe("kubevirt-migrate-vm-");
    expect(cluster.vmims[0]?.metadata?.annotations).toEqual({ "kubevirt.io/traceparent": "00-a-b-01" });
    expect(cluster.vmims[0]?.spec).toEqual({ vmiName: "vm1", addedNodeSelector: { zone: "b" } });
  });

  it("migrate --dry-run creates nothing", async () => {
    const cluster = new FakeCluster().addVm(newVm("vm1", { runStrategy: "Always" })).addVmi(newVmi("vm1", "Running"));
    await migrateVm(target(cluster), { dryRun: ["All"] });
    expect(cluster.writes[0]?.dryRun).toBe(true);
    expect(cluster.vmims).toHaveLength(0);
  });

  it("migrate a stopped VM (no VMI) is 404 and a non-running VMI is 409 VM is not running", async () => {
    const cluster = new FakeCluster().addVm(newVm("vm1", { runStrategy: "Halted" }));
    expect((await statusOf(migrateVm(target(cluster), {}))).code).toBe(404);
    cluster.addVmi(newVmi("vm1", "Scheduling"));
    expect(await statusOf(migrateVm(target(cluster), {}))).toEqual({
      code: 409,
      message: 'Operation cannot be fulfilled on virtualmachine.kubevirt.io "vm1": VM is not running',
    });
  });
});
