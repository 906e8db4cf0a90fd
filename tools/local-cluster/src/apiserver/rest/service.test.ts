import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { type ApiServerHandle, startApiServer } from "../apiserver.ts";
import { ApiError } from "../errors.ts";
import type { ResourceDef } from "../resources/types.ts";
import { WIDGET_CRD } from "../testdata/crd-fixture.ts";
import type { KubeObject } from "../types.ts";
import { deleteObject } from "./delete.ts";
import { systemContext, type WriteContext } from "./service.ts";

let api: ApiServerHandle;
let widgets: ResourceDef;
let pods: ResourceDef;
let namespaces: ResourceDef;
const ctx = (over: Partial<WriteContext> = {}): WriteContext => ({
  ...systemContext(),
  fieldValidation: "Strict",
  ...over,
});

async function code(p: Promise<unknown>): Promise<number | undefined> {
  try {
    await p;
    return undefined;
  } catch (e) {
    return e instanceof ApiError ? e.code : -1;
  }
}

beforeAll(async () => {
  api = await startApiServer({ inMemory: true, tls: false });
  const crdDef = api.service.registry.lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions") as ResourceDef;
  await api.service.create(crdDef, "v1", undefined, parse(WIDGET_CRD), ctx());
  widgets = api.service.registry.lookup("example.com", "v1", "widgets") as ResourceDef;
  pods = api.service.registry.lookup("", "v1", "pods") as ResourceDef;
  namespaces = api.service.registry.lookup("", "v1", "namespaces") as ResourceDef;
});
afterAll(async () => {
  await api?.stop();
});

describe("generic registry semantics", () => {
  it("generates names, defaults and sets uid, creationTimestamp and generation", async () => {
    const e = await api.service.create(
      widgets,
      "v1",
      "default",
      { metadata: { generateName: "w-" }, spec: { size: 1 } },
      ctx(),
    );
    expect(e.obj.metadata.name).toMatch(/^w-[bcdfghjklmnpqrstvwxz2456789]{5}$/);
    expect(e.obj.metadata.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(e.obj.metadata.creationTimestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(e.obj.metadata.generation).toBe(1);
    expect((e.obj.spec as { color: string }).color).toBe("blue");
  });

  it("requires a resourceVersion to update a custom resource, and conflicts on a stale one", async () => {
    const e = await api.service.create(
      widgets,
      "v1",
      "default",
      { metadata: { name: "u1" }, spec: { size: 1 } },
      ctx(),
    );
    const body = structuredClone<KubeObject>(e.obj);
    delete body.metadata.resourceVersion;
    expect(await code(api.service.update(widgets, "v1", "default", "u1", body, ctx()))).toBe(422);
    const fresh = structuredClone(e.obj);
    (fresh.spec as { size: number }).size = 2;
    const u = await api.service.update(widgets, "v1", "default", "u1", fresh, ctx());
    expect(u.obj.metadata.generation).toBe(2);
    expect(await code(api.service.update(widgets, "v1", "default", "u1", fresh, ctx()))).toBe(409);
  });

  it("makes no-op writes invisible: no new resourceVersion", async () => {
    const e = await api.service.create(
      widgets,
      "v1",
      "default",
      { metadata: { name: "n1" }, spec: { size: 1 } },
      ctx(),
    );
    const again = await api.service.update(widgets, "v1", "default", "n1", structuredClone(e.obj), ctx());
    expect(again.obj.metadata.resourceVersion).toBe(e.obj.metadata.resourceVersion);
    const patched = await api.service.patch(
      widgets,
      "v1",
      "default",
      "n1",
      "application/merge-patch+json",
      { spec: { size: 1 } },
      ctx(),
    );
    expect(patched.rev).toBe(e.rev);
  });

  it("keeps status and spec apart between the main endpoint and /status", async () => {
    const e = await api.service.create(
      widgets,
      "v1",
      "default",
      { metadata: { name: "s1" }, spec: { size: 1 }, status: { phase: "Ignored" } },
      ctx(),
    );
    expect(e.obj.status).toBeUndefined();
    const s = await api.service.patch(
      widgets,
      "v1",
      "default",
      "s1",
      "application/merge-patch+json",
      { status: { phase: "Ready" }, spec: { size: 9 } },
      ctx(),
      "status",
    );
    expect(s.obj.status).toEqual({ phase: "Ready" });
    expect((s.obj.spec as { size: number }).size).toBe(1);
    expect(s.obj.metadata.generation).toBe(1);
    const m = await api.service.patch(
      widgets,
      "v1",
      "default",
      "s1",
      "application/merge-patch+json",
      { status: { phase: "Nope" }, spec: { size: 2 } },
      ctx(),
    );
    expect(m.obj.status).toEqual({ phase: "Ready" });
    expect(m.obj.metadata.generation).toBe(2);
  });

  it("keeps the status a Node is created with, as kube's node strategy does (pods drop theirs)", async () => {
    const nodes = api.service.registry.lookup("", "v1", "nodes") as ResourceDef;
    const capacity = { cpu: "64", memory: "256Gi", pods: "250", "devices.kubevirt.io/kvm": "1k" };
    const node = await api.service.create(
      nodes,
      "v1",
      undefined,
      { metadata: { name: "registered" }, status: { capacity, allocatable: capacity } },
      ctx(),
    );
    expect(node.obj.status).toMatchObject({ capacity, allocatable: capacity });
    const pod = await api.service.create(
      pods,
      "v1",
      "default",
      {
        metadata: { name: "status-on-create" },
        spec: { containers: [{ name: "c", image: "i" }] },
        status: { phase: "Running", podIP: "10.0.0.9" },
      },
      ctx(),
    );
    expect((pod.obj.status as { phase?: string; podIP?: string }).podIP).toBeUndefined();
  });

  it("stores a core Event with the zero values kube-apiserver serializes", async () => {
    const events = api.service.registry.lookup("", "v1", "events") as ResourceDef;
    const e = await api.service.create(
      events,
      "v1",
      "default",
      { metadata: { name: "e1" }, involvedObject: { kind: "Pod", name: "x", namespace: "default" } },
      ctx(),
    );
    const { metadata: _, ...rest } = e.obj;
    expect(rest).toEqual({
      apiVersion: "v1",
      kind: "Event",
      involvedObject: { kind: "Pod", name: "x", namespace: "default" },
      eventTime: null,
      firstTimestamp: null,
      lastTimestamp: null,
      source: {},
      reportingComponent: "",
      reportingInstance: "",
    });
  });

  it("rejects unknown fields in Strict mode and warns in Warn mode", async () => {
    expect(
      await code(api.service.create(widgets, "v1", "default", { metadata: { name: "x1" }, spec: { bogus: 1 } }, ctx())),
    ).toBe(400);
    const warn = ctx({ fieldValidation: "Warn", warnings: [] });
    const e = await api.service.create(
      widgets,
      "v1",
      "default",
      { metadata: { name: "x2" }, spec: { bogus: 1 } },
      warn,
    );
    expect(warn.warnings).toEqual(['unknown field "spec.bogus"']);
    expect(e.obj.spec).toEqual({ color: "blue" });
  });

  it("holds an object with finalizers until the last one is removed; no new finalizers while deleting", async () => {
    await api.service.create(
      widgets,
      "v1",
      "default",
      { metadata: { name: "f1", finalizers: ["example.com/a"] }, spec: { size: 1 } },
      ctx(),
    );
    const d = await deleteObject(api.service, widgets, "default", "f1", {}, ctx());
    expect(d.deleted).toBe(false);
    expect(d.entry.obj.metadata.deletionTimestamp).toBeDefined();
    expect(d.entry.obj.metadata.generation).toBe(2);
    expect(
      await code(
        api.service.patch(
          widgets,
          "v1",
          "default",
          "f1",
          "application/merge-patch+json",
          { metadata: { finalizers: ["example.com/a", "example.com/b"] } },
          ctx(),
        ),
      ),
    ).toBe(422);
    await api.service.patch(
      widgets,
      "v1",
      "default",
      "f1",
      "application/json-patch+json",
      [{ op: "remove", path: "/metadata/finalizers" }],
      ctx(),
    );
    expect(await code(Promise.resolve().then(() => api.service.get(widgets, "default", "f1")))).toBe(404);
  });

  it("deletes scheduled pods gracefully and unscheduled ones at once", async () => {
    const spec = { containers: [{ name: "c", image: "i" }] };
    await api.service.create(pods, "v1", "default", { metadata: { name: "p-unscheduled" }, spec }, ctx());
    expect((await deleteObject(api.service, pods, "default", "p-unscheduled", {}, ctx())).deleted).toBe(true);
    await api.service.create(
      pods,
      "v1",
      "default",
      { metadata: { name: "p-node" }, spec: { ...spec, nodeName: "n1" } },
      ctx(),
    );
    const g = await deleteObject(api.service, pods, "default", "p-node", {}, ctx());
    expect(g.deleted).toBe(false);
    expect(g.entry.obj.metadata.deletionGracePeriodSeconds).toBe(30);
    expect((await deleteObject(api.service, pods, "default", "p-node", { gracePeriodSeconds: 0 }, ctx())).deleted).toBe(
      true,
    );
  });

  it("refuses content in a terminating namespace and in a missing one", async () => {
    await api.service.create(namespaces, "v1", undefined, { metadata: { name: "doomed" } }, ctx());
    await api.service.create(
      widgets,
      "v1",
      "doomed",
      { metadata: { name: "held", finalizers: ["example.com/x"] } },
      ctx(),
    );
    await deleteObject(api.service, namespaces, undefined, "doomed", {}, ctx());
    expect(await code(api.service.create(widgets, "v1", "doomed", { metadata: { name: "late" } }, ctx()))).toBe(403);
    expect(await code(api.service.create(widgets, "v1", "missing", { metadata: { name: "w" } }, ctx()))).toBe(404);
    expect(api.service.get(namespaces, undefined, "doomed").obj.status).toEqual({ phase: "Terminating" });
  });
});
