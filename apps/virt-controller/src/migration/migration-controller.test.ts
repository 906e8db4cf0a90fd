import {
  FINALIZER,
  type MigrationPolicy,
  type ObjectKey,
  objectKey,
  type VirtualMachineInstance,
  type VirtualMachineInstanceMigration,
} from "@kvt/api";
import { CORE_V1, Expectations, KUBEVIRT_V1, labelIndex, type Pod } from "@kvt/kube";
import {
  FakeApi,
  FakeRecorder,
  fakeStore,
  newMigration,
  newPod,
  newVmi,
  type Option,
  ownedBy,
  reconcileWithGuard,
  withLabels,
  withPhase,
} from "@kvt/testing";
import { describe, expect, it } from "vitest";
import { MigrationController, migrationVmiIndex } from "./migration-controller.ts";
import { renderTargetPod } from "./target-pod.ts";

const mPhase =
  (phase: string): Option<VirtualMachineInstanceMigration> =>
  (m) => {
    m.status = { ...m.status, phase: phase as "Pending" };
  };
const targetPod = (m: VirtualMachineInstanceMigration, vmi: VirtualMachineInstance, ...opts: Option<Pod>[]): Pod =>
  newPod(
    "target",
    ownedBy({ ...vmi }),
    withLabels({
      "kubevirt.io/migrationJobUID": m.metadata!.uid!,
      "kubevirt.io/migrationName": m.metadata!.name!,
      "kubevirt.io/created-by": vmi.metadata!.uid!,
    }),
    ...opts,
  );
const readyOn =
  (node: string): Option<Pod> =>
  (p) => {
    p.spec!.nodeName = node;
    p.status = { phase: "Running", conditions: [{ type: "Ready", status: "True" }] };
  };

function setup(
  m: VirtualMachineInstanceMigration,
  vmi: VirtualMachineInstance | undefined,
  pods: Pod[] = [],
  others: VirtualMachineInstanceMigration[] = [],
  policies: MigrationPolicy[] = [],
) {
  const api = new FakeApi();
  const stored = api.seed(KUBEVIRT_V1.virtualMachineInstanceMigrations, m);
  if (vmi) api.seed(KUBEVIRT_V1.virtualMachineInstances, vmi);
  const migrations = fakeStore([stored, ...others]);
  const vmis = fakeStore(vmi ? [vmi] : []);
  const podStore = fakeStore(pods, {
    job: labelIndex("kubevirt.io/migrationJobUID"),
    vmi: labelIndex("kubevirt.io/created-by"),
  });
  const recorder = new FakeRecorder();
  const controller = new MigrationController({
    migrations,
    vmis,
    podsOfMigration: (uid) => podStore.byIndex("job", uid),
    podsOfVmi: (uid) => podStore.byIndex("vmi", uid),
    policies: () => policies,
    namespaceLabels: () => ({}),
    migrationClient: api.client(KUBEVIRT_V1.virtualMachineInstanceMigrations),
    vmiClient: api.client(KUBEVIRT_V1.virtualMachineInstances),
    podClient: api.client(CORE_V1.pods),
    recorder,
    expectations: new Expectations(),
  });
  const run = () =>
    reconcileWithGuard(controller, objectKey("default", m.metadata!.name!), [migrations, vmis, podStore]);
  const now = () =>
    api.stored<VirtualMachineInstanceMigration>(
      KUBEVIRT_V1.virtualMachineInstanceMigrations,
      "default",
      m.metadata!.name!,
    );
  const vmiNow = () => api.stored<VirtualMachineInstance>(KUBEVIRT_V1.virtualMachineInstances, "default", "vmi1");
  return { api, recorder, run, now, vmiNow };
}

const runningVmi = () => newVmi("vmi1", withPhase("Running", "node01"), withLabels({ tier: "gold" }));

describe("MigrationController", () => {
  it("a new migration goes Pending and creates the target pod with anti-affinity and the added node selector", async () => {
    const vmi = runningVmi();
    const m = newMigration("m1", "vmi1", (x) => (x.spec.addedNodeSelector = { zone: "b" }));
    const { api, recorder, run, now } = setup(m, vmi);
    await run();
    expect(now()?.status?.phase).toBe("Pending");
    const pod = api.writes().find((a) => a.verb === "create")!.body as Pod;
    expect(pod.metadata?.labels?.["kubevirt.io/migrationJobUID"]).toBe(m.metadata!.uid);
    expect(pod.spec?.nodeSelector).toMatchObject({ zone: "b" });
    expect(JSON.stringify(pod.spec?.affinity)).toContain(vmi.metadata!.uid!);
    expect(recorder.reasons()).toEqual(["SuccessfulCreate"]);
  });

  it.each([
    ["cluster-wide limit", 5, "node09"],
    ["per-node outbound limit", 2, "node01"],
  ])("waits in Pending when the %s is reached", async (_n, count, node) => {
    const vmi = runningVmi();
    const others = Array.from({ length: count }, (_, i) => newMigration(`o${i}`, `ovmi${i}`, mPhase("Running")));
    const otherVmis = others.map((_, i) => newVmi(`ovmi${i}`, withPhase("Running", node)));
    const m = newMigration("m1", "vmi1", mPhase("Pending"));
    const api = new FakeApi();
    const migrations = fakeStore([api.seed(KUBEVIRT_V1.virtualMachineInstanceMigrations, m), ...others]);
    const vmis = fakeStore([vmi, ...otherVmis]);
    const controller = new MigrationController({
      migrations,
      vmis,
      podsOfMigration: () => [],
      podsOfVmi: () => [],
      policies: () => [],
      namespaceLabels: () => ({}),
      migrationClient: api.client(KUBEVIRT_V1.virtualMachineInstanceMigrations),
      vmiClient: api.client(KUBEVIRT_V1.virtualMachineInstances),
      podClient: api.client(CORE_V1.pods),
      recorder: new FakeRecorder(),
      expectations: new Expectations(),
    });
    const result = await reconcileWithGuard(controller, objectKey("default", "m1"), [migrations, vmis]);
    expect(api.summary()).toEqual([]);
    expect(result.requeueAfterMs).toBeGreaterThan(0);
  });

  it("Scheduling -> Scheduled -> hand-off to PreparingTarget with the resolved policy in migrationState", async () => {
    const vmi = runningVmi();
    const m = newMigration("m1", "vmi1", mPhase("Scheduling"));
    const policy: MigrationPolicy = {
      metadata: { name: "gold" },
      spec: {
        selectors: { virtualMachineInstanceSelector: { tier: "gold" } },
        allowPostCopy: true,
        bandwidthPerMigration: "1Gi",
      },
    };
    const { run, now, vmiNow } = setup(m, vmi, [targetPod(m, vmi, readyOn("node02"))], [], [policy]);
    await run();
    expect(now()?.status?.phase).toBe("PreparingTarget");
    const state = vmiNow()?.status?.migrationState;
    expect(state).toMatchObject({
      migrationUid: m.metadata!.uid,
      targetNode: "node02",
      sourceNode: "node01",
      targetPod: "target",
      migrationPolicyName: "gold",
    });
    expect(state?.migrationConfiguration).toMatchObject({
      allowPostCopy: true,
      allowWorkloadDisruption: true,
      bandwidthPerMigration: "1Gi",
      completionTimeoutPerGiB: 150,
    });
    expect(vmiNow()?.metadata?.labels?.["kubevirt.io/migrationTargetNodeName"]).toBe("node02");
  });

  it.each([
    ["PreparingTarget", { targetNodeAddress: "10.0.0.2" }, "TargetReady"],
    ["TargetReady", { targetNodeAddress: "10.0.0.2", startTimestamp: "2026-01-01T00:00:00Z" }, "Running"],
    ["Running", { completed: true }, "Succeeded"],
    ["Running", { failed: true, failureReason: "boom" }, "Failed"],
  ])("%s with the VMI's migrationState %j -> %s", async (phase, state, next) => {
    const m = newMigration("m1", "vmi1", mPhase(phase));
    const vmi = newVmi(
      "vmi1",
      withPhase("Running", "node01"),
      (v) => (v.status!.migrationState = { migrationUid: m.metadata!.uid, ...state }),
    );
    const { run, now } = setup(m, vmi, [targetPod(m, vmi, readyOn("node02"))]);
    await run();
    expect(now()?.status?.phase).toBe(next);
    if (next === "Failed") expect(now()?.status?.migrationState?.failureReason).toContain("boom");
  });

  it("fails with a reason when the target pod stays unschedulable past 5 minutes, deleting it", async () => {
    const vmi = runningVmi();
    const m = newMigration("m1", "vmi1", mPhase("Scheduling"));
    const pod = targetPod(m, vmi, (p) => {
      p.metadata!.creationTimestamp = new Date(Date.now() - 301_000).toISOString();
      p.status = { phase: "Pending", conditions: [{ type: "PodScheduled", status: "False", reason: "Unschedulable" }] };
    });
    const { api, run, now } = setup(m, vmi, [pod]);
    await run();
    expect(now()?.status?.phase).toBe("Failed");
    expect(now()?.status?.migrationState?.failureReason).toMatch(/unschedulable for more than 300 seconds/);
    expect(api.summary()).toContain("delete pods default/target");
  });

  it("cancellation before hand-off deletes the target pod and fails the migration, keeping the finalizer until the Failed status is stored", async () => {
    const vmi = runningVmi();
    const m = newMigration("m1", "vmi1", mPhase("Scheduling"), (x) => {
      x.metadata!.deletionTimestamp = new Date().toISOString();
      x.metadata!.finalizers = [FINALIZER.migration];
    });
    const { api, run, now } = setup(m, vmi, [targetPod(m, vmi)]);
    await run();
    expect(api.summary()).toContain("delete pods default/target");
    expect(now()?.status?.phase).toBe("Failed");
    expect(now()?.status?.migrationState?.failureReason).toBe("Migration failed due to being canceled");
    // Users (kubectl get vmim -w) see Failed before the object goes: the finalizer waits for the next pass.
    expect(now()?.metadata?.finalizers).toEqual([FINALIZER.migration]);
  });

  it("cancellation after hand-off sets abortRequested on the VMI", async () => {
    const m = newMigration(
      "m1",
      "vmi1",
      mPhase("Running"),
      (x) => (x.metadata!.deletionTimestamp = new Date().toISOString()),
    );
    const vmi = newVmi(
      "vmi1",
      withPhase("Running", "node01"),
      (v) => (v.status!.migrationState = { migrationUid: m.metadata!.uid, startTimestamp: "t" }),
    );
    const { run, vmiNow, recorder } = setup(m, vmi, [targetPod(m, vmi, readyOn("node02"))]);
    await run();
    expect(vmiNow()?.status?.migrationState?.abortRequested).toBe(true);
    expect(recorder.reasons()).toContain("AbortRequested");
  });

  it("while an abort is in flight, a reconcile with nothing new writes nothing (no condition timestamp churn)", async () => {
    const m = newMigration("m1", "vmi1", mPhase("Running"), (x) => {
      x.metadata!.deletionTimestamp = new Date().toISOString();
      x.status!.conditions = [
        {
          type: "migrationAbortRequested",
          status: "True",
          lastTransitionTime: "2026-01-01T00:00:00Z",
          reason: "MigrationAbortRequested",
          message: "The migration was canceled",
        },
      ];
    });
    const state = { migrationUid: m.metadata!.uid, startTimestamp: "t", abortRequested: true };
    const vmi = newVmi("vmi1", withPhase("Running", "node01"), (v) => (v.status!.migrationState = state));
    m.status!.migrationState = state;
    const { api, run } = setup(m, vmi, [targetPod(m, vmi, readyOn("node02"))]);
    await run();
    expect(api.writes()).toEqual([]);
  });

  it("a VMI that failed with its migration says why the migration failed, not only that the VMI shut down", async () => {
    const m = newMigration("m1", "vmi1", mPhase("Running"));
    const reason = "the source virt-launcher exited during the migration";
    const vmi = newVmi("vmi1", withPhase("Failed", "node01"), (v) => {
      v.status!.migrationState = { migrationUid: m.metadata!.uid, failed: true, failureReason: reason };
    });
    const { run, now } = setup(m, vmi, [targetPod(m, vmi, readyOn("node02"))]);
    await run();
    expect(now()?.status?.phase).toBe("Failed");
    expect(now()?.status?.migrationState?.failureReason).toBe(`source node reported migration failed: ${reason}`);
    const plain = newVmi("vmi1", withPhase("Failed", "node01"));
    const second = setup(newMigration("m2", "vmi1", mPhase("Running")), plain);
    await second.run();
    expect(second.now()?.status?.migrationState?.failureReason).toBe("Migration failed because the VMI shut down");
  });

  it("fails when the VMI does not exist", async () => {
    const { run, now } = setup(newMigration("m1", "vmi1"), undefined);
    await run();
    expect(now()?.status?.phase).toBe("Failed");
  });

  it("drops the finalizer of a finished migration and garbage-collects finished ones beyond 5 per VMI", async () => {
    const old = Array.from({ length: 6 }, (_, i) =>
      newMigration(
        `old${i}`,
        "vmi1",
        mPhase("Succeeded"),
        (x) => (x.metadata!.creationTimestamp = `2026-01-01T00:00:0${i}Z`),
      ),
    );
    const m = newMigration("m1", "vmi1", mPhase("Succeeded"));
    const { api, run } = setup(m, runningVmi(), [], old);
    await run();
    expect(api.summary()).toEqual([
      "patch virtualmachineinstancemigrations default/m1",
      "delete virtualmachineinstancemigrations default/old0",
      "delete virtualmachineinstancemigrations default/old1",
    ]);
  });
});

describe("target pod", () => {
  it("the target pod avoids the VMI's other launcher pods' host", () => {
    const vmi = runningVmi();
    const pod = renderTargetPod(vmi, newMigration("m", "vmi1"));
    expect(pod.spec?.affinity).toMatchObject({
      podAntiAffinity: { requiredDuringSchedulingIgnoredDuringExecution: [{ topologyKey: "kubernetes.io/hostname" }] },
    });
  });

  it("maps a shared Block claim on the target as on the source: a device at /dev/<volume>", () => {
    const vmi = runningVmi();
    vmi.spec.domain.devices.disks = [{ name: "data", disk: { bus: "virtio" } }];
    vmi.spec.volumes = [{ name: "data", persistentVolumeClaim: { claimName: "raw" } }];
    const claims = (name: string) => (name === "raw" ? { claimName: "raw", volumeMode: "Block" } : undefined);
    const pod = renderTargetPod(vmi, newMigration("m", "vmi1"), { claims });
    expect(pod.spec?.containers[0]?.volumeDevices).toEqual([{ name: "data", devicePath: "/dev/data" }]);
  });
});

describe("MigrationController handlers", () => {
  it("a VMI change enqueues the unfinished migrations of that VMI only, through the VMI index when given", () => {
    const vmi = runningVmi();
    const mine = newMigration("m1", "vmi1", mPhase("Running"));
    const done = newMigration("m0", "vmi1", mPhase("Succeeded"));
    const other = newMigration("m2", "vmi2", mPhase("Running"));
    const store = fakeStore([mine, done, other], { vmi: migrationVmiIndex });
    const asked: string[] = [];
    const byIndex = (k: ObjectKey): VirtualMachineInstanceMigration[] => {
      asked.push(k);
      return store.byIndex("vmi", k);
    };
    for (const migrationsOfVmi of [undefined, byIndex]) {
      const controller = new MigrationController({
        migrations: store,
        migrationsOfVmi,
        vmis: fakeStore([vmi]),
        podsOfMigration: () => [],
        podsOfVmi: () => [],
        policies: () => [],
        namespaceLabels: () => ({}),
        migrationClient: new FakeApi().client(KUBEVIRT_V1.virtualMachineInstanceMigrations),
        vmiClient: new FakeApi().client(KUBEVIRT_V1.virtualMachineInstances),
        podClient: new FakeApi().client(CORE_V1.pods),
        recorder: new FakeRecorder(),
        expectations: new Expectations(),
      });
      const keys: string[] = [];
      controller.handlers((k) => keys.push(k)).vmi.onUpdate?.(vmi, vmi);
      expect(keys).toEqual(["default/m1"]);
    }
    expect(asked).toEqual(["default/vmi1"]);
  });
});
