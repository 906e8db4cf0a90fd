import { objectKey, type VirtualMachineInstance, type VirtualMachineInstanceReplicaSet } from "@kvt/api";
import { ApiError, Expectations, KUBEVIRT_V1, namespaceIndex } from "@kvt/kube";
import {
  FakeApi,
  FakeRecorder,
  fakeStore,
  newVmi,
  type Option,
  ownedBy,
  reconcileWithGuard,
  withLabels,
  withPhase,
} from "@kvt/testing";
import { describe, expect, it } from "vitest";
import { ReplicaSetController } from "./replicaset-controller.ts";
import { deletionCandidates, vmiFromTemplate } from "./replicaset-plan.ts";

const RS_T = KUBEVIRT_V1.virtualMachineInstanceReplicaSets;
const VMI_T = KUBEVIRT_V1.virtualMachineInstances;

function newRs(replicas: number | undefined, ...options: Option<VirtualMachineInstanceReplicaSet>[]) {
  const rs: VirtualMachineInstanceReplicaSet = {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachineInstanceReplicaSet",
    metadata: { name: "web", namespace: "default", uid: "rs-uid", resourceVersion: "1", generation: 1 },
    spec: {
      ...(replicas === undefined ? {} : { replicas }),
      selector: { matchLabels: { app: "web" } },
      template: {
        metadata: { labels: { app: "web" }, annotations: { note: "x" } },
        spec: { domain: { devices: {}, resources: { requests: { memory: "128Mi" } } } },
      },
    },
  };
  for (const o of options) o(rs);
  return rs;
}

const ready: Option<VirtualMachineInstance> = (v) => {
  v.status = { ...v.status, conditions: [{ type: "Ready", status: "True" }] };
};
const createdAt =
  (iso: string): Option<VirtualMachineInstance> =>
  (v) => {
    v.metadata!.creationTimestamp = iso;
  };
const member = (rs: VirtualMachineInstanceReplicaSet, name: string, ...o: Option<VirtualMachineInstance>[]) =>
  newVmi(name, withLabels({ app: "web" }), ownedBy({ ...rs }), withPhase("Running"), ready, ...o);

function setup(rs: VirtualMachineInstanceReplicaSet, vmis: VirtualMachineInstance[] = [], burstReplicas?: number) {
  const api = new FakeApi();
  api.seed(RS_T, rs);
  for (const v of vmis) api.seed(VMI_T, v);
  const replicaSets = fakeStore([api.stored<VirtualMachineInstanceReplicaSet>(RS_T, "default", "web")!], {
    namespace: namespaceIndex,
  });
  const vmiStore = fakeStore(
    vmis.map((v) => api.stored<VirtualMachineInstance>(VMI_T, "default", v.metadata!.name!)!),
    { namespace: namespaceIndex },
  );
  const recorder = new FakeRecorder();
  const expectations = new Expectations();
  const controller = new ReplicaSetController({
    replicaSets,
    replicaSetsIn: (ns) => replicaSets.byIndex("namespace", ns),
    vmisIn: (ns) => vmiStore.byIndex("namespace", ns),
    rsClient: api.client(RS_T),
    vmiClient: api.client(VMI_T),
    recorder,
    expectations,
    burstReplicas,
    now: () => Date.parse("2026-01-01T00:00:00Z"),
  });
  const run = () => reconcileWithGuard(controller, objectKey("default", "web"), [replicaSets, vmiStore]);
  const status = () => api.stored<VirtualMachineInstanceReplicaSet>(RS_T, "default", "web")!.status;
  return { api, recorder, expectations, controller, run, status, vmiStore };
}

describe("ReplicaSetController scaling", () => {
  it("creates spec.replicas VMIs from the template, owned by the replica set, and raises expectations", async () => {
    const { api, recorder, expectations, run } = setup(newRs(2));
    await run();
    const creates = api.writes().filter((a) => a.verb === "create");
    expect(creates).toHaveLength(2);
    const vmi = creates[0].body as VirtualMachineInstance;
    expect(vmi.metadata).toMatchObject({
      generateName: "web",
      labels: { app: "web" },
      annotations: { note: "x" },
      ownerReferences: [
        {
          apiVersion: "kubevirt.io/v1",
          kind: "VirtualMachineInstanceReplicaSet",
          name: "web",
          uid: "rs-uid",
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    });
    expect(recorder.reasons()).toEqual(["SuccessfulCreate", "SuccessfulCreate"]);
    expect(expectations.satisfied(objectKey("default", "web"))).toBe(false);
  });

  it("spec.replicas defaults to 1", async () => {
    const { api, run } = setup(newRs(undefined));
    await run();
    expect(api.summary()).toEqual([
      "create virtualmachineinstances",
      "patch virtualmachineinstancereplicasets/status default/web",
    ]);
  });

  it("creates at most burstReplicas per pass", async () => {
    const { api, run } = setup(newRs(5), [], 2);
    await run();
    expect(api.summary().filter((s) => s.startsWith("create"))).toHaveLength(2);
  });

  it("does nothing while expectations are pending, but still writes the status", async () => {
    const { api, expectations, run, status } = setup(newRs(3));
    expectations.expectCreations(objectKey("default", "web"), 1);
    await run();
    expect(api.summary()).toEqual(["patch virtualmachineinstancereplicasets/status default/web"]);
    expect(status()).toEqual({ labelSelector: "app=web" });
  });

  it("scales in: deletes the VMIs not yet running first, then not ready, then the newest", async () => {
    const rs = newRs(1);
    const vmis = [
      member(rs, "old-ready", createdAt("2026-01-01T00:00:00Z")),
      member(rs, "new-ready", createdAt("2026-01-01T00:05:00Z")),
      member(rs, "scheduling", withPhase("Scheduling"), createdAt("2025-01-01T00:00:00Z")),
    ];
    const { api, recorder, run } = setup(rs, vmis);
    await run();
    expect(api.summary().filter((s) => s.startsWith("delete"))).toEqual([
      "delete virtualmachineinstances default/scheduling",
      "delete virtualmachineinstances default/new-ready",
    ]);
    expect(recorder.reasons()).toEqual(["SuccessfulDelete", "SuccessfulDelete"]);
  });

  it("replaces a finished VMI: it does not count, a new one is created and the finished one deleted", async () => {
    const rs = newRs(2);
    const { api, run } = setup(rs, [member(rs, "a"), member(rs, "b", withPhase("Failed"))]);
    await run();
    expect(api.summary()).toEqual([
      "create virtualmachineinstances",
      "delete virtualmachineinstances default/b",
      "patch virtualmachineinstancereplicasets/status default/web",
    ]);
  });

  it("a VMI being deleted does not count, so its replacement is created at once", async () => {
    const rs = newRs(1);
    const going = member(rs, "a", (v) => {
      v.metadata!.deletionTimestamp = "2026-01-01T00:00:00Z";
    });
    const { api, run } = setup(rs, [going]);
    await run();
    expect(api.summary().filter((s) => !s.includes("/status"))).toEqual(["create virtualmachineinstances"]);
  });

  it("paused: no creates or deletes, the ReplicaPaused condition and a SuccessfulPaused event", async () => {
    const { api, recorder, run, status } = setup(
      newRs(3, (r) => {
        r.spec.paused = true;
      }),
    );
    await run();
    expect(api.summary()).toEqual(["patch virtualmachineinstancereplicasets/status default/web"]);
    expect(status()?.conditions).toEqual([
      {
        type: "ReplicaPaused",
        status: "True",
        reason: "Paused",
        message: "Controller got paused",
        lastTransitionTime: "2026-01-01T00:00:00Z",
      },
    ]);
    expect(recorder.reasons()).toEqual(["SuccessfulPaused"]);
  });

  it("a failed create sets ReplicaFailure (FailedCreate) and fails the reconcile so it is retried", async () => {
    const { api, expectations, run, status, recorder } = setup(newRs(1));
    api.failOn("create", "virtualmachineinstances", new ApiError("quota exceeded", 403, { code: 403 }));
    await expect(run()).rejects.toThrow("quota exceeded");
    expect(status()?.conditions).toEqual([
      expect.objectContaining({ type: "ReplicaFailure", status: "True", reason: "FailedCreate" }),
    ]);
    expect(recorder.reasons()).toEqual(["FailedCreate"]);
    expect(expectations.satisfied(objectKey("default", "web"))).toBe(true);
  });
});

describe("ReplicaSetController ownership", () => {
  it("adopts a matching orphan after re-reading the replica set, and counts it", async () => {
    const orphan = newVmi("orphan", withLabels({ app: "web" }), withPhase("Running"));
    const { api, run } = setup(newRs(1), [orphan]);
    await run();
    expect(api.summary()).toEqual([
      "patch virtualmachineinstances default/orphan",
      "patch virtualmachineinstancereplicasets/status default/web",
    ]);
    const stored = api.stored<VirtualMachineInstance>(VMI_T, "default", "orphan")!;
    expect(stored.metadata?.ownerReferences?.[0]).toMatchObject({
      kind: "VirtualMachineInstanceReplicaSet",
      uid: "rs-uid",
    });
    expect(api.actions.some((a) => a.verb === "get" && a.resource === "virtualmachineinstancereplicasets")).toBe(true);
  });

  it("leaves VMIs of another controller and non-matching orphans alone", async () => {
    const other = newVmi(
      "other",
      withLabels({ app: "web" }),
      ownedBy({ kind: "VirtualMachine", metadata: { name: "x", uid: "x" } }),
    );
    const stranger = newVmi("stranger", withLabels({ app: "db" }));
    const { api, run } = setup(newRs(0), [other, stranger]);
    await run();
    expect(api.summary()).toEqual(["patch virtualmachineinstancereplicasets/status default/web"]);
  });

  it("releases an owned VMI whose labels no longer match", async () => {
    const rs = newRs(0);
    const { api, run } = setup(rs, [member(rs, "moved", withLabels({ app: "elsewhere" }))]);
    await run();
    expect(api.stored<VirtualMachineInstance>(VMI_T, "default", "moved")!.metadata?.ownerReferences).toEqual([]);
  });

  it("the VMI handlers lower expectations and enqueue the owner; an orphan enqueues matching replica sets", () => {
    const rs = newRs(1);
    const { controller, expectations } = setup(rs);
    const keys: string[] = [];
    const h = controller.handlers((k) => keys.push(k));
    const key = objectKey("default", "web");
    expectations.expectCreations(key, 1);
    h.vmi.onAdd?.(member(rs, "a"));
    expect(expectations.satisfied(key)).toBe(true);
    h.vmi.onAdd?.(newVmi("orphan", withLabels({ app: "web" })));
    h.vmi.onAdd?.(newVmi("stranger", withLabels({ app: "db" })));
    expect(keys).toEqual([key, key]);
  });
});

describe("ReplicaSetController status", () => {
  it("reports replicas, readyReplicas and the canonical selector", async () => {
    const rs = newRs(2);
    const notReady = (v: VirtualMachineInstance): void => {
      v.status = { phase: "Running" };
    };
    const { run, status } = setup(rs, [member(rs, "a"), member(rs, "b", notReady)]);
    await run();
    expect(status()).toEqual({ replicas: 2, readyReplicas: 1, labelSelector: "app=web" });
  });

  it("writes nothing when the status already holds", async () => {
    const rs = newRs(1, (r) => {
      r.status = { replicas: 1, readyReplicas: 1, labelSelector: "app=web" };
    });
    const { api, run } = setup(rs, [member(rs, "a")]);
    await run();
    expect(api.summary()).toEqual([]);
  });
});

describe("replica set plan", () => {
  it("vmiFromTemplate uses the template's name as generateName when it has one", () => {
    const rs = newRs(1, (r) => {
      r.spec.template.metadata = { name: "base-", labels: { app: "web" } };
    });
    expect(vmiFromTemplate(rs).metadata).toMatchObject({ generateName: "base-", namespace: "default" });
    expect(vmiFromTemplate(rs).metadata?.name).toBeUndefined();
  });

  it("deletionCandidates never returns more than asked", () => {
    expect(deletionCandidates([newVmi("a"), newVmi("b")], 5)).toHaveLength(2);
    expect(deletionCandidates([newVmi("a")], 0)).toEqual([]);
  });
});
