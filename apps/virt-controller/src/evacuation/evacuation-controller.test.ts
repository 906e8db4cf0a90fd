import { objectKey, type VirtualMachineInstance, type VirtualMachineInstanceMigration } from "@kvt/api";
import { Expectations, KUBEVIRT_V1 } from "@kvt/kube";
import { FakeApi, FakeRecorder, fakeStore, newMigration, newVmi, reconcileWithGuard, withPhase } from "@kvt/testing";
import { describe, expect, it } from "vitest";
import { EvacuationController } from "./evacuation-controller.ts";

function setup(
  vmi: VirtualMachineInstance,
  migrations: VirtualMachineInstanceMigration[] = [],
  outbound = 0,
  clusterStrategy?: string,
  nodeTaints: { key: string; effect: string }[] = [],
) {
  const node = { apiVersion: "v1", kind: "Node", metadata: { name: "n1" }, spec: { taints: nodeTaints } };
  const api = new FakeApi();
  const vmis = fakeStore([vmi]);
  const ms = fakeStore(migrations);
  const controller = new EvacuationController({
    vmis,
    migrations: ms,
    outboundFrom: () => outbound,
    migrationClient: api.client(KUBEVIRT_V1.virtualMachineInstanceMigrations),
    recorder: new FakeRecorder(),
    expectations: new Expectations(),
    clusterConfig: () => (clusterStrategy ? { evictionStrategy: clusterStrategy } : undefined),
    nodes: fakeStore([node]),
    vmisOnNode: (n) => (n === "n1" ? [vmi] : []),
  });
  return {
    api,
    controller,
    run: () => reconcileWithGuard(controller, objectKey("default", vmi.metadata!.name!), [vmis, ms]),
  };
}
const evacuating = (...annotations: [string, string][]) =>
  newVmi("a", withPhase("Running", "n1"), (v) => {
    v.spec.evictionStrategy = "LiveMigrate";
    v.status!.evacuationNodeName = "n1";
    v.status!.conditions = [{ type: "LiveMigratable", status: "True" }];
    if (annotations.length) v.metadata!.annotations = Object.fromEntries(annotations);
  });

describe("EvacuationController", () => {
  it("creates a system-critical evacuation migration for a VMI marked for evacuation", async () => {
    const { api, run } = setup(evacuating());
    await run();
    const m = api.writes()[0].body as VirtualMachineInstanceMigration;
    expect(m.metadata).toMatchObject({
      generateName: "kubevirt-evacuation-",
      annotations: { "kubevirt.io/evacuationMigration": "n1" },
    });
    expect(m.spec).toEqual({ vmiName: "a", priority: "system-critical" });
  });

  it("uses system-maintenance for descheduler evictions", async () => {
    const { api, run } = setup(evacuating(["kubevirt.io/eviction-source", "descheduler"]));
    await run();
    expect((api.writes()[0].body as VirtualMachineInstanceMigration).spec.priority).toBe("system-maintenance");
  });

  it.each([
    ["a migration is in flight", [newMigration("m", "a", (m) => (m.status = { phase: "Running" }))], 0],
    ["the node's outbound limit is reached", [], 2],
  ] as const)("waits when %s", async (_n, migrations, outbound) => {
    const { api, run } = setup(evacuating(), [...migrations], outbound);
    await run();
    expect(api.writes()).toEqual([]);
  });

  it.each([
    ["External (left to its external controller)", "External", true, undefined],
    ["None", "None", true, undefined],
    ["LiveMigrateIfPossible, not migratable", "LiveMigrateIfPossible", false, undefined],
    ["LiveMigrate, not migratable", "LiveMigrate", false, undefined],
    ["no strategy and none in the cluster", undefined, true, undefined],
  ] as const)("creates no migration for a marked VMI: %s", async (_n, strategy, migratable, cluster) => {
    const vmi = newVmi("a", withPhase("Running", "n1"), (v) => {
      if (strategy) v.spec.evictionStrategy = strategy;
      v.status!.evacuationNodeName = "n1";
      v.status!.conditions = [{ type: "LiveMigratable", status: migratable ? "True" : "False" }];
    });
    const { api, run } = setup(vmi, [], 0, cluster);
    await run();
    expect(api.writes()).toEqual([]);
  });

  it("follows the KubeVirt CR's evictionStrategy for a VMI without one", async () => {
    const vmi = newVmi("a", withPhase("Running", "n1"), (v) => {
      v.status!.evacuationNodeName = "n1";
      v.status!.conditions = [{ type: "LiveMigratable", status: "True" }];
    });
    const { api, run } = setup(vmi, [], 0, "LiveMigrateIfPossible");
    await run();
    expect(api.writes()).toHaveLength(1);
  });

  it("evacuates every LiveMigrate VMI of a node tainted kubevirt.io/drain:NoSchedule, marked or not", async () => {
    const vmi = newVmi("a", withPhase("Running", "n1"), (v) => {
      v.spec.evictionStrategy = "LiveMigrate";
      v.status!.conditions = [{ type: "LiveMigratable", status: "True" }];
    });
    const { api, run, controller } = setup(vmi, [], 0, undefined, [{ key: "kubevirt.io/drain", effect: "NoSchedule" }]);
    const keys: string[] = [];
    controller
      .handlers((k) => keys.push(k))
      .node.onUpdate?.(
        {},
        {
          metadata: { name: "n1" },
          spec: { taints: [{ key: "kubevirt.io/drain", effect: "NoSchedule" }] },
        },
      );
    expect(keys).toEqual(["default/a"]);
    await run();
    const m = api.writes()[0]?.body as VirtualMachineInstanceMigration;
    expect(m.metadata?.annotations).toEqual({ "kubevirt.io/evacuationMigration": "n1" });
  });

  it("ignores VMIs not marked for evacuation", async () => {
    const { api, run } = setup(newVmi("a", withPhase("Running", "n1")));
    await run();
    expect(api.writes()).toEqual([]);
  });

  it("enqueues only VMIs marked for evacuation (every other VMI change costs no reconcile)", () => {
    const { controller } = setup(evacuating());
    const keys: string[] = [];
    const h = controller.handlers((k) => keys.push(k));
    const plain = newVmi("b", withPhase("Running", "n1"));
    h.vmi.onAdd?.(plain);
    h.vmi.onUpdate?.(plain, plain);
    expect(keys).toEqual([]);
    h.vmi.onUpdate?.(plain, evacuating());
    expect(keys).toEqual(["default/a"]);
  });
});
