import { objectKey } from "@kvt/api";
import { type ApiError, done, KUBEVIRT_V1, type Reconciler } from "@kvt/kube";
import { describe, expect, it } from "vitest";
import { newVmi, withMemory, withPhase } from "./builders.ts";
import { eventually } from "./eventually.ts";
import { FakeApi } from "./fake-client.ts";
import { fakeStore } from "./fake-store.ts";
import { reconcileWithGuard } from "./guard.ts";
import { applyJsonPatch } from "./json-patch-apply.ts";

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

describe("eventually", () => {
  it("retries on a throw, undefined, null and false, and returns the first other value", async () => {
    const answers: unknown[] = [undefined, null, false, new Error("not yet"), 0];
    const value = await eventually(
      () => {
        const next = answers.shift();
        if (next instanceof Error) throw next;
        return next as number | undefined;
      },
      { intervalMs: 1 },
    );
    expect(value).toBe(0);
    expect(answers).toEqual([]);
  });

  it("names what it awaited on timeout and keeps the last error as the cause", async () => {
    const cause = new Error("phase is Pending");
    const failure = await eventually(
      () => {
        throw cause;
      },
      { timeoutMs: 20, intervalMs: 5, what: "the VMI to run" },
    ).catch((e: unknown) => e as Error);
    expect(failure.message).toBe("Timed out after 20 ms waiting for the VMI to run: phase is Pending");
    expect(failure.cause).toBe(cause);
  });
});

describe("applyJsonPatch", () => {
  it("applies RFC 6902 operations to a copy and is atomic when one fails", () => {
    const doc = { spec: { runStrategy: "Halted" }, list: [1] };
    expect(
      applyJsonPatch(doc, [
        { op: "test", path: "/spec/runStrategy", value: "Halted" },
        { op: "replace", path: "/spec/runStrategy", value: "Always" },
        { op: "add", path: "/list/-", value: 2 },
      ]),
    ).toEqual({ spec: { runStrategy: "Always" }, list: [1, 2] });
    expect(() =>
      applyJsonPatch(doc, [
        { op: "add", path: "/list/-", value: 3 },
        { op: "test", path: "/spec/runStrategy", value: "Always" },
      ]),
    ).toThrow("test failed at /spec/runStrategy");
    expect(doc).toEqual({ spec: { runStrategy: "Halted" }, list: [1] });
  });
});
