/**
 * pods/eviction and PodDisruptionBudgets as kube-apiserver and kube-controller-manager serve them: the budget check
 * (pure, by table), the disruption controller's status, and the whole flow through the real kubectl (`create --raw`
 * on the subresource, `kubectl drain` retrying on 429 until the budget allows, cordon's taint, uncordon).
 */
import { eventually } from "@kvt/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "../apiserver.ts";
import { computeBudgetStatus } from "../controllers/disruption.ts";
import { desiredTaints } from "../controllers/node-unschedulable.ts";
import { ApiError } from "../errors.ts";
import { type Kubectl, kubectl } from "../testdata/kubectl.ts";
import type { KubeObject } from "../types.ts";
import { checkDisruptionBudget, EVICTION_BUDGET_MESSAGE } from "./eviction.ts";

const pdb = (generation: number, status: Record<string, unknown>): KubeObject => ({
  metadata: { name: "web", namespace: "default", generation },
  spec: {},
  status,
});

const readyPod = (name: string, extra: Partial<KubeObject["metadata"]> = {}): KubeObject => ({
  metadata: { name, namespace: "default", labels: { app: "web" }, ...extra },
  status: { phase: "Running", conditions: [{ type: "Ready", status: "True" }] },
});

function thrown(f: () => unknown): ApiError {
  try {
    f();
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  throw new Error("expected an ApiError");
}

describe("checkDisruptionBudget()", () => {
  it("answers 429 while the budget's generation is not yet observed", () => {
    const e = thrown(() => checkDisruptionBudget(pdb(2, { observedGeneration: 1, disruptionsAllowed: 3 }), "a", "t"));
    expect([e.code, e.reason, e.message]).toEqual([429, "TooManyRequests", EVICTION_BUDGET_MESSAGE]);
    expect(e.status.details).toEqual({
      causes: [
        { reason: "DisruptionBudget", message: "The disruption budget web is still being processed by the server." },
      ],
      retryAfterSeconds: 10,
    });
  });

  it("answers 429 with the healthy counts when no disruption is allowed", () => {
    const s = { observedGeneration: 1, disruptionsAllowed: 0, desiredHealthy: 2, currentHealthy: 2 };
    const e = thrown(() => checkDisruptionBudget(pdb(1, s), "a", "t"));
    expect(e.code).toBe(429);
    expect(e.status.details?.causes?.[0]?.message).toBe(
      "The disruption budget web needs 2 healthy pods and has 2 currently",
    );
  });

  it.each([
    [{ disruptionsAllowed: -1 }, "pdb disruptions allowed is negative"],
    [
      {
        disruptionsAllowed: 1,
        disruptedPods: Object.fromEntries(Array.from({ length: 2001 }, (_, i) => [`p${i}`, "t"])),
      },
      "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
    ],
  ])("answers 403 for a budget it cannot use (%#)", (s, why) => {
    const e = thrown(() => checkDisruptionBudget(pdb(1, { observedGeneration: 1, ...s }), "a", "t"));
    expect([e.code, e.message]).toEqual([403, `poddisruptionbudget.policy "web" is forbidden: ${why}`]);
  });

  it("takes one disruption and records the pod as disrupted", () => {
    const next = checkDisruptionBudget(
      pdb(1, { observedGeneration: 1, disruptionsAllowed: 2, disruptedPods: { b: "t0" } }),
      "a",
      "t1",
    );
    expect(next).toMatchObject({ disruptionsAllowed: 1, disruptedPods: { a: "t1", b: "t0" } });
    expect(next.conditions).toBeUndefined();
  });

  it("turns DisruptionAllowed False when it takes the last disruption", () => {
    const next = checkDisruptionBudget(pdb(1, { observedGeneration: 1, disruptionsAllowed: 1 }), "a", "t1");
    expect(next.conditions).toEqual([
      { type: "DisruptionAllowed", status: "False", reason: "InsufficientPods", message: "", lastTransitionTime: "t1" },
    ]);
  });
});

describe("computeBudgetStatus()", () => {
  const now = Date.parse("2026-01-01T00:00:00Z");
  const budget = (spec: Record<string, unknown>, status: Record<string, unknown> = {}): KubeObject => ({
    metadata: { name: "web", namespace: "default", generation: 3 },
    spec: { selector: { matchLabels: { app: "web" } }, ...spec },
    status,
  });
  const owned = (name: string): KubeObject =>
    readyPod(name, { ownerReferences: [{ kind: "ReplicaSet", name: "rs", uid: "u", controller: true } as never] });

  it.each([
    ["minAvailable 1 of 2 ready", { minAvailable: 1 }, [readyPod("a"), readyPod("b")], [1, 2, 1, 2]],
    ["minAvailable 2 of 2 ready", { minAvailable: 2 }, [readyPod("a"), readyPod("b")], [0, 2, 2, 2]],
    ["maxUnavailable 1 of scale 3", { maxUnavailable: 1 }, [owned("a"), owned("b"), owned("c")], [1, 3, 2, 3]],
    ["minAvailable 50% of scale 3", { minAvailable: "50%" }, [owned("a"), owned("b"), owned("c")], [1, 3, 2, 3]],
  ])("%s: [allowed, currentHealthy, desiredHealthy, expectedPods]", (_n, spec, pods, want) => {
    const s = computeBudgetStatus(budget(spec), pods, () => 3, now);
    expect([s.disruptionsAllowed, s.currentHealthy, s.desiredHealthy, s.expectedPods]).toEqual(want);
    expect(s.observedGeneration).toBe(3);
    expect(s.conditions[0]).toMatchObject({
      type: "DisruptionAllowed",
      status: want[0] > 0 ? "True" : "False",
      reason: want[0] > 0 ? "SufficientPods" : "InsufficientPods",
    });
  });

  it("does not count unready, terminating or just-evicted pods as healthy, and forgets old evictions", () => {
    const unready = { ...readyPod("u"), status: { phase: "Running" } } as KubeObject;
    const going = readyPod("g", { deletionTimestamp: "2026-01-01T00:00:00Z" });
    const evicted = readyPod("e");
    const stale = readyPod("s");
    const prev = { disruptedPods: { e: "2025-12-31T23:59:30Z", s: "2025-12-31T23:50:00Z", gone: "x" } };
    const s = computeBudgetStatus(budget({ minAvailable: 1 }, prev), [unready, going, evicted, stale], () => 1, now);
    expect(s.currentHealthy).toBe(1);
    expect(s.disruptedPods).toEqual({ e: "2025-12-31T23:59:30Z" });
  });

  it("selects no pods with a selector that does not parse, and allows no disruption", () => {
    const bad = budget({ minAvailable: 1, selector: { matchExpressions: [{ key: "app", operator: "Near" }] } });
    const s = computeBudgetStatus(bad, [readyPod("a")], () => 1, now);
    expect([s.expectedPods, s.currentHealthy, s.disruptionsAllowed]).toEqual([0, 0, 0]);
  });

  it("fails the sync for a percentage budget over a pod without a controller", () => {
    const s = computeBudgetStatus(budget({ maxUnavailable: "10%" }), [readyPod("a")], () => 1, now);
    expect(s.disruptionsAllowed).toBe(0);
    expect(s.conditions[0]).toMatchObject({ status: "False", reason: "SyncFailed" });
  });
});

describe("desiredTaints()", () => {
  it.each([
    [true, [], [{ key: "node.kubernetes.io/unschedulable", effect: "NoSchedule" }]],
    [false, [{ key: "node.kubernetes.io/unschedulable", effect: "NoSchedule" }], []],
    [false, [{ key: "x", effect: "NoExecute" }], [{ key: "x", effect: "NoExecute" }]],
  ])("unschedulable %s keeps other taints and sets its own", (unschedulable, taints, want) => {
    expect(desiredTaints({ metadata: { name: "n" }, spec: { unschedulable, taints } })).toEqual(want);
  });
});

/** An object as `kubectl get -o json` prints it, as far as these tests read it. */
interface Doc {
  spec?: { taints?: unknown[] } & Record<string, unknown>;
  status?: Record<string, unknown>;
}

describe("eviction and drain through the real kubectl", () => {
  let server: ApiServerHandle;
  let k: Kubectl;

  const pod = (name: string): string => `apiVersion: v1
kind: Pod
metadata: {name: ${name}, labels: {app: web}}
spec:
  nodeName: n1
  containers: [{name: c, image: busybox}]
`;

  const json = async (args: string[]): Promise<Doc> => {
    const r = await k.run([...args, "-o", "json"]);
    return JSON.parse(r.stdout || "{}") as Doc;
  };

  const evict = (name: string): Promise<{ code: number; stderr: string }> =>
    k.run([
      "create",
      "--raw",
      `/api/v1/namespaces/default/pods/${name}/eviction`,
      "-f",
      k.file(
        `${name}-eviction.json`,
        JSON.stringify({
          apiVersion: "policy/v1",
          kind: "Eviction",
          metadata: { name },
          deleteOptions: { gracePeriodSeconds: 0 },
        }),
      ),
    ]);

  beforeAll(async () => {
    server = await startApiServer({ inMemory: true });
    k = kubectl(server.kubeconfigPath);
    const node = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n";
    expect((await k.run(["create", "-f", k.file("n1.yaml", node)])).code).toBe(0);
    for (const name of ["a", "b"]) {
      expect((await k.run(["create", "-f", k.file(`${name}.yaml`, pod(name))])).code).toBe(0);
      const status = '{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}';
      const r = await k.run(["patch", "pod", name, "--subresource=status", "--type=merge", "-p", status]);
      expect(r.stderr).toBe("");
    }
    const budget =
      "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web}\nspec: {minAvailable: 1, selector: {matchLabels: {app: web}}}\n";
    expect((await k.run(["create", "-f", k.file("pdb.yaml", budget)])).code).toBe(0);
  }, 60_000);

  afterAll(async () => {
    k?.cleanup();
    await server?.stop();
  });

  it("the disruption controller computes the budget's status", async () => {
    const status = await eventually(async () => {
      const s = (await json(["get", "pdb", "web"])).status;
      return s?.expectedPods === 2 ? s : undefined;
    });
    const table = await k.run(["get", "pdb", "web"]);
    expect(table.stdout.split("\n")[0]).toMatch(/^NAME\s+MIN AVAILABLE\s+MAX UNAVAILABLE\s+ALLOWED DISRUPTIONS\s+AGE$/);
    expect(table.stdout.split("\n")[1]).toMatch(/^web\s+1\s+N\/A\s+1\s+/);
    expect(status).toMatchObject({
      currentHealthy: 2,
      desiredHealthy: 1,
      disruptionsAllowed: 1,
      observedGeneration: 1,
    });
  });

  it("evicts while the budget allows, then answers kube-apiserver's 429", async () => {
    const first = await evict("a");
    expect(first.stderr).toBe("");
    expect((await k.run(["get", "pod", "a"])).stderr).toContain('pods "a" not found');
    await eventually(async () => (await json(["get", "pdb", "web"])).status?.expectedPods === 1);
    const second = await evict("b");
    expect(second.code).not.toBe(0);
    expect(second.stderr).toContain(EVICTION_BUDGET_MESSAGE);
    expect((await k.run(["get", "pod", "b"])).code).toBe(0);
  });

  it("kubectl drain cordons, retries while the budget forbids, completes once it allows; uncordon undoes it", async () => {
    const args = ["drain", "n1", "--ignore-daemonsets", "--delete-emptydir-data", "--force", "--grace-period=0"];
    const blocked = await k.run([...args, "--timeout=7s"]);
    expect(blocked.code).not.toBe(0);
    expect(blocked.stderr).toContain(`(will retry after 5s): ${EVICTION_BUDGET_MESSAGE}`);
    const node = await eventually(async () => {
      const n = await json(["get", "node", "n1"]);
      return n.spec?.taints?.length ? n : undefined;
    });
    expect(node.spec).toEqual({
      unschedulable: true,
      taints: [{ key: "node.kubernetes.io/unschedulable", effect: "NoSchedule" }],
    });
    expect((await k.run(["delete", "pdb", "web"])).code).toBe(0);
    const drained = await k.run([...args, "--timeout=20s"]);
    expect(drained.stdout).toContain("node/n1 drained");
    expect((await k.run(["uncordon", "n1"])).stdout).toContain("node/n1 uncordoned");
    await eventually(async () => (await json(["get", "node", "n1"])).spec?.taints === undefined);
  }, 60_000);
});
