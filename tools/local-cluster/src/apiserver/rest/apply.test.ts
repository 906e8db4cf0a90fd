/** Server-side apply and managedFields through the registry (ResourceService), with kube-apiserver's answers. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { type ApiServerHandle, startApiServer } from "../apiserver.ts";
import { ApiError } from "../errors.ts";
import type { ResourceDef } from "../resources/types.ts";
import { WIDGET_CRD } from "../testdata/crd-fixture.ts";
import type { Json, JsonObject } from "../types.ts";
import { PATCH_TYPES, systemContext, type WriteContext } from "./service.ts";

let api: ApiServerHandle;
let widgets: ResourceDef;

const ctx = (options: Record<string, unknown> = {}, over: Partial<WriteContext> = {}): WriteContext => ({
  ...systemContext(),
  fieldValidation: "Strict",
  warnings: [],
  options,
  ...over,
});

const widget = (name: string, spec: JsonObject, extra: JsonObject = {}): JsonObject => ({
  apiVersion: "example.com/v1",
  kind: "Widget",
  metadata: { name },
  spec,
  ...extra,
});

async function failure(p: Promise<unknown>): Promise<ApiError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof ApiError) return e;
    throw e;
  }
  throw new Error("the write succeeded");
}

const apply = (name: string, body: unknown, options: Record<string, unknown>, sub = "", over = {}) =>
  api.service.patch(widgets, "v1", "default", name, PATCH_TYPES.apply, body, ctx(options, over), sub);

const managed = (obj: { metadata: { managedFields?: Json[] } }): JsonObject[] =>
  (obj.metadata.managedFields ?? []) as JsonObject[];

beforeAll(async () => {
  api = await startApiServer({ inMemory: true, tls: false });
  const crdDef = api.service.registry.lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions") as ResourceDef;
  await api.service.create(crdDef, "v1", undefined, parse(WIDGET_CRD), ctx());
  widgets = api.service.registry.lookup("example.com", "v1", "widgets") as ResourceDef;
});
afterAll(async () => {
  await api?.stop();
});

describe("server-side apply in the registry", () => {
  it("refuses an apply without fieldManager, with managedFields, or of another kind or version", async () => {
    const noManager = await failure(apply("a1", widget("a1", { size: 1 }), {}));
    expect([noManager.code, noManager.message]).toEqual([
      422,
      'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
    ]);
    const withManaged = await failure(
      apply("a1", { ...widget("a1", { size: 1 }), metadata: { name: "a1", managedFields: [] } }, { fieldManager: "m" }),
    );
    expect([withManaged.code, withManaged.message]).toEqual([400, "metadata.managedFields must be nil"]);
    const otherKind = await failure(apply("a1", { ...widget("a1", {}), kind: "Gadget" }, { fieldManager: "m" }));
    expect([otherKind.code, otherKind.message]).toEqual([400, "invalid object type: example.com/v1, Kind=Gadget"]);
    const otherVersion = await failure(apply("a1", { ...widget("a1", {}), apiVersion: "v1" }, { fieldManager: "m" }));
    expect(otherVersion.message).toBe("invalid object type: /v1, Kind=Widget");
    const notObject = await failure(apply("a1", ["x"], { fieldManager: "m" }));
    expect(notObject.code).toBe(400);
    expect(api.service.store.get("example.com/widgets", "default/a1")).toBeUndefined();
  });

  it("creates by apply; a dry run stores nothing; the schema's defaults are nobody's", async () => {
    const dry = await apply("a2", widget("a2", { size: 1 }), { fieldManager: "gitops" }, "", { dryRun: true });
    expect(managed(dry.obj).map((e) => e.manager)).toEqual(["gitops"]);
    expect(api.service.store.get("example.com/widgets", "default/a2")).toBeUndefined();
    const e = await apply("a2", widget("a2", { size: 1 }), { fieldManager: "gitops" });
    expect((e.obj.spec as JsonObject).color).toBe("blue");
    expect(managed(e.obj)).toEqual([
      {
        manager: "gitops",
        operation: "Apply",
        apiVersion: "example.com/v1",
        time: expect.any(String),
        fieldsType: "FieldsV1",
        fieldsV1: { "f:spec": { "f:size": {} } },
      },
    ]);
  });

  it("owns status only through the status subresource, with subresource: status", async () => {
    await apply("a3", widget("a3", { size: 1 }, { status: { phase: "Ignored" } }), { fieldManager: "gitops" });
    const main = api.service.get(widgets, "default", "a3").obj;
    expect(main.status).toBeUndefined();
    expect(managed(main)[0]?.fieldsV1).toEqual({ "f:spec": { "f:size": {} } });
    const s = await apply("a3", widget("a3", {}, { status: { phase: "Ready" } }), { fieldManager: "ctrl" }, "status");
    expect((s.obj.status as JsonObject).phase).toBe("Ready");
    expect(managed(s.obj).find((e) => e.manager === "ctrl")).toMatchObject({
      operation: "Apply",
      subresource: "status",
      fieldsV1: { "f:status": { "f:phase": {} } },
    });
    // The spec the status apply left out stays: it is the main endpoint's.
    expect((s.obj.spec as JsonObject).size).toBe(1);
  });

  it("leaves the object as it was when an apply conflicts", async () => {
    await apply("a4", widget("a4", { size: 1 }), { fieldManager: "one" });
    const before = api.service.get(widgets, "default", "a4");
    const err = await failure(apply("a4", widget("a4", { size: 2 }), { fieldManager: "two" }));
    expect(err.code).toBe(409);
    expect(err.message).toBe('Apply failed with 1 conflict: conflict with "one": .spec.size');
    expect(err.status).toMatchObject({
      reason: "Conflict",
      details: { causes: [{ reason: "FieldManagerConflict", message: 'conflict with "one"', field: ".spec.size" }] },
    });
    expect(api.service.get(widgets, "default", "a4").rev).toBe(before.rev);
    const forced = await apply("a4", widget("a4", { size: 2 }), { fieldManager: "two", force: true });
    expect((forced.obj.spec as JsonObject).size).toBe(2);
    expect(managed(forced.obj).map((e) => e.manager)).toEqual(["two"]);
  });

  it("owns no field the schema prunes when unknown fields only warn", async () => {
    const warnings: string[] = [];
    const e = await apply("a9", widget("a9", { size: 1, nope: { deep: 1 } }), { fieldManager: "gitops" }, "", {
      fieldValidation: "Warn",
      warnings,
    });
    expect(warnings).toEqual(['unknown field "spec.nope"']);
    expect(e.obj.spec).toEqual({ size: 1, color: "blue" });
    expect(managed(e.obj)[0]?.fieldsV1).toEqual({ "f:spec": { "f:size": {} } });
    const strict = await failure(apply("a9", widget("a9", { size: 1, nope: 1 }), { fieldManager: "gitops" }));
    expect(strict.code).toBe(422);
    expect(strict.message).toContain('unknown field "spec.nope"');
  });

  it("applies again to an object created meanwhile instead of answering AlreadyExists", async () => {
    const [a, b] = await Promise.all([
      apply("a7", widget("a7", { size: 1 }), { fieldManager: "first" }),
      apply("a7", widget("a7", { size: 1 }), { fieldManager: "second" }),
    ]);
    expect(a.obj.metadata.uid).toBe(b.obj.metadata.uid);
    const stored = api.service.get(widgets, "default", "a7").obj;
    expect(
      managed(stored)
        .map((e) => e.manager)
        .sort(),
    ).toEqual(["first", "second"]);
    const clash = await Promise.allSettled([
      apply("a8", widget("a8", { size: 1 }), { fieldManager: "first" }),
      apply("a8", widget("a8", { size: 2 }), { fieldManager: "second" }),
    ]);
    expect(clash.map((r) => (r.status === "rejected" ? (r.reason as ApiError).reason : "ok")).sort()).toEqual([
      "Conflict",
      "ok",
    ]);
  });

  it("names the manager of a plain write from its User-Agent, and honours managedFields an update sends", async () => {
    const c = await api.service.create(
      widgets,
      "v1",
      "default",
      widget("a5", { size: 1 }),
      ctx({}, { userAgent: "argocd-application-controller/v2.13 (linux/amd64)" }),
    );
    expect(managed(c.obj)).toEqual([
      expect.objectContaining({
        manager: "argocd-application-controller",
        operation: "Update",
        fieldsV1: { "f:spec": { ".": {}, "f:color": {}, "f:size": {} } },
      }),
    ]);
    const handOver = [{ ...managed(c.obj)[0], manager: "someone-else" }];
    const u = await api.service.update(
      widgets,
      "v1",
      "default",
      "a5",
      { ...c.obj, metadata: { ...c.obj.metadata, managedFields: handOver } },
      ctx({ fieldManager: "editor" }),
    );
    expect(managed(u.obj).map((e) => e.manager)).toEqual(["someone-else"]);
    const tooLong = await failure(
      api.service.create(widgets, "v1", "default", widget("a6", {}), ctx({ fieldManager: "x".repeat(129) })),
    );
    expect(tooLong.message).toBe(
      'CreateOptions.meta.k8s.io "" is invalid: fieldManager: Too long: may not be more than 128 bytes',
    );
  });
});
