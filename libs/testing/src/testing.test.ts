import { objectKey } from "@kvt/api";
import { type ApiError, done, KUBEVIRT_V1, type Reconciler } from "@kvt/kube";
import { describe, expect, it } from "vitest";
import { newVmi, withMemory, withPhase } from "./builders.ts";
import { FakeApi } from "./fake-client.ts";
import { fakeStore } from "./fake-store.ts";
import { reconcileWithGuard } from "./guard.ts";

describe("reconcileWithGuard", () => {
  it("fails a reconcile that mutates a cached object", async () => {
    const store = fakeStore([newVmi("a")]);
    const bad: Reconciler = {
      reconcile: async (key) => {
        const vmi = store.get(key)!;
        (vmi.metadata as { labels?: Record<string, string> }).labels = { x: "y" };
        return done();
      },
    };
    await expect(reconcileWithGuard(bad, objectKey("default", "a"), [store])).rejects.toThrow(TypeError);
  });

  it("lets a reconcile that edits a structuredClone pass", async () => {
    const store = fakeStore([newVmi("a", withMemory("1Gi"), withPhase("Running"))]);
    const good: Reconciler = {
      reconcile: async (key) => {
        const vmi = structuredClone(store.get(key)!);
        vmi.metadata!.labels = { x: "y" };
        return done();
      },
    };
    await expect(reconcileWithGuard(good, objectKey("default", "a"), [store])).resolves.toEqual({});
  });
});

describe("FakeApi", () => {
  it("records writes, rejects failed JSON-patch tests with 422 and stale updates with 409", async () => {
    const api = new FakeApi();
    const vmis = api.client<ReturnType<typeof newVmi>>(KUBEVIRT_V1.virtualMachineInstances);
    const created = await vmis.create(newVmi("a"));
    await vmis.patch("default", "a", [{ op: "add", path: "/status", value: { phase: "Pending" } }], "status");
    const failed = await vmis
      .patch("default", "a", [{ op: "test", path: "/status/phase", value: "Running" }], "status")
      .catch((e: unknown) => e);
    expect((failed as ApiError).code).toBe(422);
    const stale = await vmis.update(created).catch((e: unknown) => e);
    expect((stale as ApiError).code).toBe(409);
    expect(api.summary()).toEqual([
      "create virtualmachineinstances",
      "patch virtualmachineinstances/status default/a",
      "patch virtualmachineinstances/status default/a",
      "update virtualmachineinstances default/a",
    ]);
    expect(
      api.stored<ReturnType<typeof newVmi>>(KUBEVIRT_V1.virtualMachineInstances, "default", "a")?.status?.phase,
    ).toBe("Pending");
  });
});
