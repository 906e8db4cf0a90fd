import { objectKey, type VirtualMachine, type VirtualMachineInstance, type VirtualMachinePool } from "@kvt/api";
import { controllerOwnerIndex, Expectations, KUBEVIRT_V1, namespaceIndex, requeueAfter } from "@kvt/kube";
import {
  FakeApi,
  FakeRecorder,
  fakeStore,
  newVm,
  newVmi,
  type Option,
  ownedBy,
  reconcileWithGuard,
  withLabels,
  withPhase,
} from "@kvt/testing";
import { describe, expect, it } from "vitest";
import { CONTROLLER_REVISIONS } from "../vm/instancetype-sync.ts";
import { failingVms } from "./pool-autoheal.ts";
import { PoolController } from "./pool-controller.ts";
import { indexVmSpec, newVmNames, scaleInOrder } from "./pool-plan.ts";
import { type PoolRevision, poolRevision } from "./pool-revisions.ts";
import { PoolUpdater } from "./pool-updater.ts";

const POOL_T = KUBEVIRT_V1.virtualMachinePools;
const VM_T = KUBEVIRT_V1.virtualMachines;

function newPool(replicas: number | undefined, ...options: Option<VirtualMachinePool>[]): VirtualMachinePool {
  const p: VirtualMachinePool = {
    apiVersion: "pool.kubevirt.io/v1beta1",
    kind: "VirtualMachinePool",
    metadata: {
      name: "pool",
      namespace: "default",
      uid: "pool-uid",
      resourceVersion: "1",
      generation: 3,
      finalizers: ["pool.kubevirt.io/finalizer"],
    },
    spec: {
      ...(replicas === undefined ? {} : { replicas }),
      selector: { matchLabels: { app: "web" } },
      virtualMachineTemplate: {
        metadata: { labels: { app: "web" }, annotations: { a: "b" } },
        spec: {
          runStrategy: "Always",
          template: {
            metadata: { labels: { app: "web" } },
            spec: { domain: { devices: {} } },
          },
        },
      },
    },
  };
  for (const o of options) o(p);
  return p;
}

const member = (pool: VirtualMachinePool, name: string, ...o: Option<VirtualMachine>[]): VirtualMachine =>
  newVm(
    name,
    withLabels({ app: "web" }),
    ownedBy({ ...pool }),
    (vm) => {
      vm.metadata!.finalizers = ["pool.kubevirt.io/finalizer"];
    },
    ...o,
  );

function setup(pool: VirtualMachinePool, vms: VirtualMachine[] = []) {
  const api = new FakeApi();
  api.seed(POOL_T, pool);
  for (const v of vms) api.seed(VM_T, v);
  const pools = fakeStore([api.stored<VirtualMachinePool>(POOL_T, "default", "pool")!]);
  const vmStore = fakeStore(
    vms.map((v) => api.stored<VirtualMachine>(VM_T, "default", v.metadata!.name!)!),
    { namespace: namespaceIndex },
  );
  const recorder = new FakeRecorder();
  const expectations = new Expectations();
  const controller = new PoolController({
    pools,
    vms: vmStore,
    vmsIn: (ns) => vmStore.byIndex("namespace", ns),
    poolClient: api.client(POOL_T),
    vmClient: api.client(VM_T),
    recorder,
    expectations,
    now: () => Date.parse("2026-01-01T00:00:00Z"),
    random: () => 0,
  });
  const run = () => reconcileWithGuard(controller, objectKey("default", "pool"), [pools, vmStore]);
  const stored = () => api.stored<VirtualMachinePool>(POOL_T, "default", "pool")!;
  return { api, recorder, expectations, controller, run, stored };
}

describe("PoolController scale out", () => {
  it("creates <pool>-0 and <pool>-1 from the VM template, owned, with the pool finalizer and revision label", async () => {
    const { api, recorder, expectations, run } = setup(newPool(2));
    await run();
    const created = api
      .writes()
      .filter((a) => a.verb === "create")
      .map((a) => a.body as VirtualMachine);
    expect(created.map((v) => v.metadata?.name)).toEqual(["pool-0", "pool-1"]);
    expect(created[0]?.metadata).toMatchObject({
      namespace: "default",
      labels: { app: "web", "kubevirt.io/vm-pool-revision-name": "pool-3" },
      annotations: { a: "b" },
      finalizers: ["pool.kubevirt.io/finalizer"],
      ownerReferences: [
        {
          apiVersion: "pool.kubevirt.io/v1beta1",
          kind: "VirtualMachinePool",
          name: "pool",
          uid: "pool-uid",
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    });
    expect(created[0]?.spec.runStrategy).toBe("Always");
    expect(created[0]?.spec.template.metadata?.labels).toEqual({
      app: "web",
      "kubevirt.io/vm-pool-revision-name": "pool-3",
    });
    expect(recorder.reasons()).toEqual(["SuccessfulCreate", "SuccessfulCreate"]);
    expect(expectations.satisfied(objectKey("default", "pool"))).toBe(false);
  });

  it("fills the lowest free indices, skipping names any VM of the namespace has", async () => {
    const pool = newPool(3);
    const { api, run } = setup(pool, [member(pool, "pool-1"), newVm("pool-0")]);
    await run();
    expect(api.summary().filter((s) => s.startsWith("create"))).toHaveLength(2);
    expect(
      api
        .writes()
        .filter((a) => a.verb === "create")
        .map((a) => (a.body as VirtualMachine).metadata?.name),
    ).toEqual(["pool-2", "pool-3"]);
  });

  it("adds the pool finalizer to a pool without it", async () => {
    const { api, run, stored } = setup(
      newPool(0, (p) => {
        delete p.metadata!.finalizers;
      }),
    );
    await run();
    expect(api.summary()[0]).toBe("patch virtualmachinepools default/pool");
    expect(stored().metadata?.finalizers).toEqual(["pool.kubevirt.io/finalizer"]);
  });

  it("a failed create sets ReplicaFailure (FailedScaleOut) and fails the reconcile", async () => {
    const { api, run, stored, recorder } = setup(newPool(1));
    api.failOn("create", "virtualmachines", new Error("quota"));
    await expect(run()).rejects.toThrow("error during scale out: quota");
    expect(stored().status?.conditions).toEqual([
      {
        type: "ReplicaFailure",
        status: "True",
        reason: "FailedScaleOut",
        message: "error during scale out: quota",
        lastTransitionTime: "2026-01-01T00:00:00Z",
      },
    ]);
    expect(recorder.reasons()).toEqual(["FailedCreate", "FailedScaleOut"]);
  });
});

describe("PoolController scale in", () => {
  it("deletes the surplus VMs by the selection policy and drops their pool finalizer", async () => {
    const pool = newPool(1, (p) => {
      p.spec.scaleInStrategy = { proactive: { selectionPolicy: { sortPolicy: "DescendingOrder" } } };
    });
    const { api, recorder, run } = setup(pool, [
      member(pool, "pool-0"),
      member(pool, "pool-1"),
      member(pool, "pool-2"),
    ]);
    await run();
    expect(api.summary().filter((s) => !s.includes("/status"))).toEqual([
      "delete virtualmachines default/pool-2",
      "patch virtualmachines default/pool-2",
      "delete virtualmachines default/pool-1",
      "patch virtualmachines default/pool-1",
    ]);
    expect(recorder.reasons()).toEqual(["SuccessfulDelete", "SuccessfulDelete"]);
  });

  it("counts VMs already being deleted towards the scale-in", async () => {
    const pool = newPool(1, (p) => {
      p.spec.scaleInStrategy = { proactive: { selectionPolicy: { sortPolicy: "AscendingOrder" } } };
    });
    const going = member(pool, "pool-2", (vm) => {
      vm.metadata!.deletionTimestamp = "2026-01-01T00:00:00Z";
    });
    const { api, run } = setup(pool, [member(pool, "pool-0"), member(pool, "pool-1"), going]);
    await run();
    expect(api.summary().filter((s) => s.startsWith("delete"))).toEqual(["delete virtualmachines default/pool-0"]);
  });

  it("at the desired count, a VM deleted by someone else loses the pool finalizer so it can be replaced", async () => {
    const pool = newPool(1);
    const going = member(pool, "pool-0", (vm) => {
      vm.metadata!.deletionTimestamp = "2026-01-01T00:00:00Z";
    });
    const { api, run } = setup(pool, [going]);
    await run();
    expect(api.stored<VirtualMachine>(VM_T, "default", "pool-0")?.metadata?.finalizers).toEqual([]);
  });

  it("scaleInStrategy unmanaged: never deletes", async () => {
    const pool = newPool(0, (p) => {
      p.spec.scaleInStrategy = { unmanaged: {} };
    });
    const { api, run } = setup(pool, [member(pool, "pool-0")]);
    await run();
    expect(api.summary().filter((s) => s.startsWith("delete"))).toEqual([]);
  });
});

describe("PoolController status, pause and deletion", () => {
  it("reports replicas, readyReplicas and the selector", async () => {
    const pool = newPool(2);
    const ready = (vm: VirtualMachine): void => {
      vm.status = { conditions: [{ type: "Ready", status: "True" }] };
    };
    const { run, stored } = setup(pool, [member(pool, "pool-0", ready), member(pool, "pool-1")]);
    await run();
    expect(stored().status).toEqual({ replicas: 2, readyReplicas: 1, labelSelector: "app=web" });
  });

  it("paused: no scaling, ReplicaPaused with KubeVirt's reason and message", async () => {
    const { api, run, stored, recorder } = setup(
      newPool(2, (p) => {
        p.spec.paused = true;
      }),
    );
    await run();
    expect(api.summary()).toEqual(["patch virtualmachinepools/status default/pool"]);
    expect(stored().status?.conditions?.[0]).toMatchObject({
      type: "ReplicaPaused",
      reason: "SuccessfulPaused",
      message: "Pool controller is paused",
    });
    expect(recorder.reasons()).toEqual(["SuccessfulPaused"]);
  });

  it("a deleted pool frees its VMs of the pool finalizer, then itself", async () => {
    const pool = newPool(2, (p) => {
      p.metadata!.deletionTimestamp = "2026-01-01T00:00:00Z";
    });
    const { api, run, stored } = setup(pool, [member(pool, "pool-0")]);
    await run();
    expect(api.stored<VirtualMachine>(VM_T, "default", "pool-0")?.metadata?.finalizers).toEqual([]);
    expect(stored().metadata?.finalizers).toEqual([]);
    expect(api.summary().filter((s) => s.startsWith("create") || s.startsWith("delete"))).toEqual([]);
  });

  it("releases a VM whose labels the selector no longer matches", async () => {
    const pool = newPool(1);
    const { api, run } = setup(pool, [member(pool, "pool-0", withLabels({ app: "other" }))]);
    await run();
    const vm = api.stored<VirtualMachine>(VM_T, "default", "pool-0")!;
    expect(vm.metadata?.ownerReferences).toEqual([]);
    expect(vm.metadata?.finalizers).toEqual([]);
  });

  it("VM handlers lower expectations of the owning pool", () => {
    const pool = newPool(1);
    const { controller, expectations } = setup(pool);
    const keys: string[] = [];
    const h = controller.handlers((k) => keys.push(k));
    const key = objectKey("default", "pool");
    expectations.expectCreations(key, 1);
    h.vm.onAdd?.(member(pool, "pool-0"));
    h.vm.onAdd?.(newVm("unrelated"));
    expect(expectations.satisfied(key)).toBe(true);
    expect(keys).toEqual([key]);
  });
});

describe("pool plan", () => {
  it("newVmNames skips used names", () => {
    const used = new Set(["pool-0", "pool-2"]);
    expect(newVmNames(newPool(1), 3, (n) => used.has(n))).toEqual(["pool-1", "pool-3", "pool-4"]);
  });

  it("indexVmSpec suffixes data volume templates and the volumes naming them, and secrets when asked", () => {
    const pool = newPool(1, (p) => {
      p.spec.nameGeneration = { appendIndexToSecretRefs: true };
      const spec = p.spec.virtualMachineTemplate.spec!;
      spec.dataVolumeTemplates = [{ metadata: { name: "root" }, spec: {} }];
      spec.template.spec!.volumes = [
        { name: "a", dataVolume: { name: "root" } },
        { name: "b", secret: { secretName: "creds" } },
        { name: "c", configMap: { name: "cfg" } },
      ];
    });
    const spec = indexVmSpec(pool, 4);
    expect(spec.dataVolumeTemplates?.[0]?.metadata).toEqual({ name: "root-4" });
    expect(spec.template.spec?.volumes).toEqual([
      { name: "a", dataVolume: { name: "root-4" } },
      { name: "b", secret: { secretName: "creds-4" } },
      { name: "c", configMap: { name: "cfg" } },
    ]);
  });

  it("scaleInOrder: Newest and Oldest sort by creation time", () => {
    const at = (name: string, iso: string) =>
      newVm(name, (vm) => {
        vm.metadata!.creationTimestamp = iso;
      });
    const vms = [at("a", "2026-01-01T00:00:00Z"), at("b", "2026-01-02T00:00:00Z")];
    const policy = (sortPolicy: "Newest" | "Oldest") =>
      newPool(1, (p) => {
        p.spec.scaleInStrategy = { proactive: { selectionPolicy: { sortPolicy } } };
      });
    expect(scaleInOrder(policy("Newest"), vms).map((v) => v.metadata?.name)).toEqual(["b", "a"]);
    expect(scaleInOrder(policy("Oldest"), vms).map((v) => v.metadata?.name)).toEqual(["a", "b"]);
  });
});

describe("PoolController updates (revisions)", () => {
  const REV_T = CONTROLLER_REVISIONS;

  const revision = (pool: VirtualMachinePool, generation: number, mutate?: (p: VirtualMachinePool) => void) => {
    const p = structuredClone(pool);
    p.metadata!.generation = generation;
    mutate?.(p);
    return poolRevision(p) as PoolRevision & { metadata: { uid?: string } };
  };
  const labelled =
    (rev: string): Option<VirtualMachine> =>
    (vm) => {
      vm.metadata!.labels = { ...vm.metadata!.labels, "kubevirt.io/vm-pool-revision-name": rev };
      vm.spec.template.metadata = {
        ...vm.spec.template.metadata,
        labels: { ...vm.spec.template.metadata?.labels, "kubevirt.io/vm-pool-revision-name": rev },
      };
    };
  const vmiOf = (vm: VirtualMachine, rev: string, ready = true): VirtualMachineInstance =>
    newVmi(vm.metadata!.name, ownedBy({ ...vm, kind: "VirtualMachine" }), withPhase("Running"), (v) => {
      v.metadata!.labels = { "kubevirt.io/vm-pool-revision-name": rev };
      if (ready) v.status = { ...v.status, conditions: [{ type: "Ready", status: "True" }] };
    });

  function setupWithUpdater(
    pool: VirtualMachinePool,
    vms: VirtualMachine[],
    vmis: VirtualMachineInstance[],
    revisions: PoolRevision[],
  ) {
    const api = new FakeApi();
    api.seed(POOL_T, pool);
    for (const v of vms) api.seed(VM_T, v);
    for (const v of vmis) api.seed(KUBEVIRT_V1.virtualMachineInstances, v);
    for (const r of revisions) api.seed(REV_T, r);
    const pools = fakeStore([api.stored<VirtualMachinePool>(POOL_T, "default", "pool")!]);
    const vmStore = fakeStore(
      vms.map((v) => api.stored<VirtualMachine>(VM_T, "default", v.metadata!.name!)!),
      { namespace: namespaceIndex },
    );
    const vmiStore = fakeStore(
      vmis.map(
        (v) => api.stored<VirtualMachineInstance>(KUBEVIRT_V1.virtualMachineInstances, "default", v.metadata!.name!)!,
      ),
    );
    const revStore = fakeStore(
      revisions.map((r) => api.stored<PoolRevision>(REV_T, "default", r.metadata.name)!),
      { owner: controllerOwnerIndex },
    );
    const recorder = new FakeRecorder();
    const expectations = new Expectations();
    const controller = new PoolController({
      pools,
      vms: vmStore,
      vmsIn: (ns) => vmStore.byIndex("namespace", ns),
      poolClient: api.client(POOL_T),
      vmClient: api.client(VM_T),
      recorder,
      expectations,
      now: () => Date.parse("2026-01-01T00:00:00Z"),
      random: () => 0,
      updater: new PoolUpdater({
        revisions: revStore,
        revisionsOf: (uid) => revStore.byIndex("owner", uid),
        vmis: vmiStore,
        revisionClient: api.client(REV_T),
        vmClient: api.client(VM_T),
        vmiClient: api.client(KUBEVIRT_V1.virtualMachineInstances),
        recorder,
        expectations,
      }),
    });
    const run = () =>
      reconcileWithGuard(controller, objectKey("default", "pool"), [pools, vmStore, vmiStore, revStore]);
    return { api, run, recorder };
  }

  it("scale out records the pool spec in ControllerRevision <pool>-<generation> first", async () => {
    const { api, run } = setupWithUpdater(newPool(1), [], [], []);
    await run();
    expect(api.summary()[0]).toBe("create controllerrevisions");
    const rev = api.stored<PoolRevision>(REV_T, "default", "pool-3")!;
    expect(rev).toMatchObject({ revision: 3, metadata: { ownerReferences: [{ kind: "VirtualMachinePool" }] } });
    expect(rev.data?.virtualMachineTemplate.metadata?.labels).toEqual({ app: "web" });
  });

  it("a VM made from an older template gets the pool's template, keeping its firmware uuid", async () => {
    const pool = newPool(1);
    const old = revision(pool, 2, (p) => {
      p.spec.virtualMachineTemplate.spec!.runStrategy = "Halted";
    });
    const vm = member(pool, "pool-0", labelled("pool-2"), (v) => {
      v.spec.runStrategy = "Halted";
      v.spec.template.spec!.domain.firmware = { uuid: "keep-me" };
    });
    const { api, run, recorder } = setupWithUpdater(pool, [vm], [], [old]);
    await run();
    const stored = api.stored<VirtualMachine>(VM_T, "default", "pool-0")!;
    expect(stored.spec.runStrategy).toBe("Always");
    expect(stored.spec.template.spec?.domain.firmware?.uuid).toBe("keep-me");
    expect(stored.metadata?.labels?.["kubevirt.io/vm-pool-revision-name"]).toBe("pool-3");
    expect(stored.metadata?.finalizers).toEqual(["pool.kubevirt.io/finalizer"]);
    expect(recorder.reasons()).toContain("SuccessfulUpdate");
  });

  it("proactive update restarts a VMI made from another VMI template, within maxUnavailable", async () => {
    const pool = newPool(2, (p) => {
      p.spec.maxUnavailable = 1;
    });
    const current = revision(pool, 3);
    const old = revision(pool, 2, (p) => {
      p.spec.virtualMachineTemplate.spec!.template.spec!.domain.devices = { autoattachSerialConsole: false };
    });
    const vms = [member(pool, "pool-0", labelled("pool-3")), member(pool, "pool-1", labelled("pool-3"))];
    const vmis = vms.map((v) => vmiOf(v, "pool-2"));
    const { api, run } = setupWithUpdater(pool, vms, vmis, [current, old]);
    const result = await run();
    expect(api.summary().filter((s) => s.startsWith("delete"))).toEqual([
      "delete virtualmachineinstances default/pool-0",
    ]);
    expect(result).toEqual(requeueAfter(3000));
  });

  it("a VMI from an equal template under another revision only gets its label patched", async () => {
    const pool = newPool(1);
    const vm = member(pool, "pool-0", labelled("pool-3"));
    const { api, run } = setupWithUpdater(pool, [vm], [vmiOf(vm, "pool-2")], [revision(pool, 3), revision(pool, 2)]);
    await run();
    const vmi = api.stored<VirtualMachineInstance>(KUBEVIRT_V1.virtualMachineInstances, "default", "pool-0")!;
    expect(vmi.metadata?.labels?.["kubevirt.io/vm-pool-revision-name"]).toBe("pool-3");
    expect(api.summary().filter((s) => s.startsWith("delete"))).toEqual([]);
  });

  it("prunes revisions no VM or VMI uses", async () => {
    const pool = newPool(1);
    const vm = member(pool, "pool-0", labelled("pool-3"));
    const { api, run } = setupWithUpdater(pool, [vm], [vmiOf(vm, "pool-3")], [revision(pool, 3), revision(pool, 1)]);
    await run();
    expect(api.summary().filter((s) => s.startsWith("delete"))).toEqual(["delete controllerrevisions default/pool-1"]);
  });

  it("updateStrategy unmanaged: VMs keep their old template", async () => {
    const pool = newPool(1, (p) => {
      p.spec.updateStrategy = { unmanaged: {} };
    });
    const vm = member(pool, "pool-0", labelled("pool-2"));
    const old = revision(pool, 2, (p) => {
      p.spec.virtualMachineTemplate.spec!.runStrategy = "Halted";
    });
    const { api, run } = setupWithUpdater(pool, [vm], [], [old]);
    await run();
    expect(api.summary().filter((s) => s.startsWith("update"))).toEqual([]);
  });
});

describe("PoolController autohealing", () => {
  const failing =
    (count: number): Option<VirtualMachine> =>
    (vm) => {
      vm.status = { startFailure: { consecutiveFailCount: count } };
    };

  it("deletes a VM that failed to start startUpFailureThreshold times, so it is replaced", async () => {
    const pool = newPool(2, (p) => {
      p.spec.autohealing = {};
    });
    const { api, run } = setup(pool, [member(pool, "pool-0", failing(3)), member(pool, "pool-1", failing(2))]);
    await run();
    expect(api.summary().filter((s) => s.startsWith("delete"))).toEqual(["delete virtualmachines default/pool-0"]);
  });

  it("without spec.autohealing a failing VM stays", async () => {
    const pool = newPool(1);
    const { api, run } = setup(pool, [member(pool, "pool-0", failing(9))]);
    await run();
    expect(api.summary().filter((s) => s.startsWith("delete"))).toEqual([]);
  });

  it.each([
    ["CrashLoopBackOff for 6m (default 5m)", "CrashLoopBackOff", 6, undefined, true],
    ["CrashLoopBackOff for 4m", "CrashLoopBackOff", 4, undefined, false],
    ["ErrImagePull for 2m with minFailingToStartDuration 90s", "ErrImagePull", 2, "90s", true],
    ["Running (not a failing status)", "Running", 60, undefined, false],
  ])("%s -> %s", (_name, printableStatus, minutes, duration, heals) => {
    const now = Date.parse("2026-01-01T01:00:00Z");
    const pool = newPool(1, (p) => {
      p.spec.autohealing = duration ? { minFailingToStartDuration: duration } : {};
    });
    const vm = newVm("pool-0", (v) => {
      v.status = {
        printableStatus: printableStatus as "Running",
        conditions: [
          { type: "Ready", status: "False", lastTransitionTime: new Date(now - minutes * 60_000).toISOString() },
        ],
      };
    });
    expect(failingVms(pool, [vm], now).length > 0).toBe(heals);
  });
});
