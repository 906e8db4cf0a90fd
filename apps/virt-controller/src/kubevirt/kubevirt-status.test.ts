import { type KubeVirt, objectKey } from "@kvt/api";
import { KUBEVIRT_V1 } from "@kvt/kube";
import { FakeApi, reconcileWithGuard } from "@kvt/testing";
import { describe, expect, it } from "vitest";
import {
  APPS_V1,
  type DaemonSetView,
  type DeploymentView,
  KubeVirtStatusController,
  planKubeVirtStatus,
  type WorkloadState,
  workloadNotReady,
} from "./kubevirt-status.ts";

const NS = "kubevirt";
const T0 = new Date("2026-12-01T00:00:00Z");
const T1 = new Date("2026-12-01T00:01:00Z");

const deployment = (name: string, replicas: number, available: number): DeploymentView => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name, namespace: NS },
  spec: { replicas },
  status: { availableReplicas: available },
});
const daemonSet = (desired: number, available: number): DaemonSetView => ({
  apiVersion: "apps/v1",
  kind: "DaemonSet",
  metadata: { name: "virt-handler", namespace: NS },
  status: { desiredNumberScheduled: desired, numberAvailable: available },
});

describe("workloadNotReady", () => {
  it.each<[WorkloadState, string | undefined]>([
    [{ kind: "Deployment", name: "virt-api", desired: 2, available: 2 }, undefined],
    [
      { kind: "Deployment", name: "virt-api", desired: 2, available: 1 },
      "Deployment virt-api has 1 of 2 replicas available",
    ],
    [{ kind: "Deployment", name: "virt-api" }, "Deployment virt-api does not exist"],
    [{ kind: "DaemonSet", name: "virt-handler", desired: 0, available: 0 }, "DaemonSet virt-handler wants no replicas"],
  ])("%j -> %s", (w, want) => expect(workloadNotReady(w)).toBe(want));
});

describe("planKubeVirtStatus", () => {
  const ready: WorkloadState[] = [
    { kind: "Deployment", name: "virt-api", desired: 2, available: 2 },
    { kind: "DaemonSet", name: "virt-handler", desired: 2, available: 2 },
  ];
  it("is Deployed and Available with virt-operator's reasons once every workload is available", () => {
    const plan = planKubeVirtStatus(ready, [], T0);
    expect(plan.phase).toBe("Deployed");
    expect(plan.conditions.map((c) => [c.type, c.status, c.reason])).toEqual([
      ["Available", "True", "AllComponentsReady"],
      ["Progressing", "False", "AllComponentsReady"],
      ["Degraded", "False", "AllComponentsReady"],
      ["Created", "True", "AllResourcesCreated"],
    ]);
    expect(plan.conditions[0].message).toBe("All components are ready.");
  });

  it("is Deploying, and says which workload it waits for", () => {
    const plan = planKubeVirtStatus([ready[0], { kind: "DaemonSet", name: "virt-handler" }], [], T0);
    expect(plan.phase).toBe("Deploying");
    const available = plan.conditions.find((c) => c.type === "Available");
    expect(available).toMatchObject({ status: "False", reason: "DeploymentInProgress" });
    expect(available?.message).toBe("Deploying: DaemonSet virt-handler does not exist.");
    expect(plan.conditions.find((c) => c.type === "Created")?.status).toBe("False");
  });

  it("keeps a condition's lastTransitionTime while its status holds", () => {
    const first = planKubeVirtStatus(ready, [], T0);
    const again = planKubeVirtStatus(ready, first.conditions, T1);
    expect(again.conditions.map((c) => c.lastTransitionTime)).toEqual(first.conditions.map(() => T0.toISOString()));
    const down = planKubeVirtStatus([{ ...ready[0], available: 0 }, ready[1]], first.conditions, T1);
    expect(down.conditions.find((c) => c.type === "Available")?.lastTransitionTime).toBe(T1.toISOString());
    expect(down.conditions.find((c) => c.type === "Created")?.lastTransitionTime).toBe(T0.toISOString());
  });
});

describe("KubeVirtStatusController", () => {
  function harness(): { api: FakeApi; run: () => Promise<number | undefined>; kv: () => KubeVirt | undefined } {
    const api = new FakeApi();
    api.seed(KUBEVIRT_V1.kubevirts, {
      apiVersion: "kubevirt.io/v1",
      kind: "KubeVirt",
      metadata: { name: "kubevirt", namespace: NS },
      spec: {},
    });
    const kv = (): KubeVirt | undefined => api.stored<KubeVirt>(KUBEVIRT_V1.kubevirts, NS, "kubevirt");
    const controller = new KubeVirtStatusController({
      namespace: NS,
      kubevirt: () => structuredClone(kv()),
      kubevirts: api.client<KubeVirt>(KUBEVIRT_V1.kubevirts),
      deployments: api.client<DeploymentView>(APPS_V1.deployments),
      daemonSets: api.client<DaemonSetView>(APPS_V1.daemonSets),
      now: () => T0,
    });
    return {
      api,
      kv,
      run: async () => (await reconcileWithGuard(controller, objectKey(NS, "kubevirt"), [])).requeueAfterMs,
    };
  }

  it("leaves the status alone, polling slowly, while none of the workloads exists (components run as processes)", async () => {
    const h = harness();
    expect(await h.run()).toBe(30_000);
    expect(h.kv()?.status).toBeUndefined();
    expect(h.api.writes()).toEqual([]);
  });

  it("writes Deploying while a workload is missing, then Available once all are, and nothing when unchanged", async () => {
    const h = harness();
    h.api.seed(APPS_V1.deployments, deployment("virt-api", 2, 2));
    h.api.seed(APPS_V1.deployments, deployment("virt-controller", 2, 1));
    expect(await h.run()).toBe(5_000);
    expect(h.kv()?.status?.phase).toBe("Deploying");
    expect(h.kv()?.status?.conditions?.find((c) => c.type === "Available")?.message).toBe(
      "Deploying: Deployment virt-controller has 1 of 2 replicas available; DaemonSet virt-handler does not exist.",
    );

    h.api.seed(APPS_V1.deployments, deployment("virt-controller", 2, 2));
    h.api.seed(APPS_V1.daemonSets, daemonSet(2, 2));
    expect(await h.run()).toBe(30_000);
    expect(h.kv()?.status?.phase).toBe("Deployed");
    expect(h.kv()?.status?.conditions?.find((c) => c.type === "Available")?.status).toBe("True");

    const writes = h.api.writes().length;
    await h.run();
    expect(h.api.writes().length).toBe(writes);
  });
});
