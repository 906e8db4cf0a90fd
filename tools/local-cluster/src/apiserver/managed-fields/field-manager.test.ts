import { describe, expect, it } from "vitest";
import { ApiError } from "../errors.ts";
import type { JSONSchemaProps } from "../resources/schema.ts";
import type { Json, JsonObject, KubeObject } from "../types.ts";
import {
  applyConfig,
  decodeManaged,
  managerOf,
  trackUpdate,
  validateWriteOptions,
  type WriteScope,
} from "./field-manager.ts";
import { FieldSet, fieldSetOf, pathString } from "./field-set.ts";
import { rootType } from "./field-types.ts";
import { compare, mergeValues, toFieldSet } from "./typed-value.ts";

const T0 = "2026-01-01T00:00:00Z";
const T1 = "2026-01-01T00:01:00Z";

const builtin = (apiVersion: string, sub = ""): WriteScope => ({
  apiVersion,
  subresource: sub,
  hasStatus: true,
  type: rootType(undefined, false),
});

const deployment = (replicas: number, image = "nginx:1", extra: JsonObject = {}): KubeObject => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "web", namespace: "default" },
  spec: {
    replicas,
    selector: { matchLabels: { app: "web" } },
    template: {
      metadata: { labels: { app: "web" } },
      spec: { containers: [{ name: "nginx", image }] },
    },
    ...extra,
  },
});

const WIDGET_SCHEMA: JSONSchemaProps = {
  type: "object",
  properties: {
    spec: {
      type: "object",
      properties: {
        size: { type: "integer" },
        color: { type: "string" },
        ports: {
          type: "array",
          "x-kubernetes-list-type": "map",
          "x-kubernetes-list-map-keys": ["port", "protocol"],
          items: {
            type: "object",
            properties: { port: { type: "integer" }, protocol: { type: "string", default: "TCP" } },
          },
        },
        tags: { type: "array", "x-kubernetes-list-type": "set", items: { type: "string" } },
        args: { type: "array", items: { type: "string" } },
        selector: { type: "object", "x-kubernetes-map-type": "atomic", additionalProperties: { type: "string" } },
        extra: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
      },
    },
    status: { type: "object", properties: { phase: { type: "string" } } },
  },
};

const custom = (sub = ""): WriteScope => ({
  apiVersion: "example.com/v1",
  subresource: sub,
  hasStatus: true,
  type: rootType(WIDGET_SCHEMA, true),
});

const widget = (spec: JsonObject, managedFields?: Json[]): KubeObject => ({
  apiVersion: "example.com/v1",
  kind: "Widget",
  metadata: { name: "w", namespace: "default", ...(managedFields ? { managedFields } : {}) },
  spec,
});

function entries(obj: KubeObject): JsonObject[] {
  return (obj.metadata.managedFields ?? []) as JsonObject[];
}

function conflictOf(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  throw new Error("no conflict");
}

describe("FieldSet", () => {
  it("encodes and decodes FieldsV1, marking a member with children by '.'", () => {
    const s = fieldSetOf(
      ["f:spec", "f:replicas"],
      ["f:spec", "f:containers", 'k:{"name":"a"}'],
      ["f:spec", "f:containers", 'k:{"name":"a"}', "f:image"],
      ["f:tags", 'v:"x"'],
      ["f:args", "i:0"],
    );
    const doc = s.toFieldsV1();
    expect(JSON.stringify(doc)).toBe(
      '{"f:args":{"i:0":{}},"f:spec":{"f:containers":{"k:{\\"name\\":\\"a\\"}":{".":{},"f:image":{}}},"f:replicas":{}},"f:tags":{"v:\\"x\\"":{}}}',
    );
    const back = FieldSet.fromFieldsV1(doc);
    expect(back.toFieldsV1()).toEqual(doc);
    expect(back.has(["f:spec", "f:containers", 'k:{"name":"a"}'])).toBe(true);
    expect(back.has(["f:spec", "f:containers"])).toBe(false);
  });

  it("prints paths as structured-merge-diff does", () => {
    expect(pathString(["f:spec", "f:replicas"])).toBe(".spec.replicas");
    expect(pathString(["f:spec", "f:containers", 'k:{"name":"web"}', "f:image"])).toBe(
      '.spec.containers[name="web"].image',
    );
    expect(pathString(["f:ports", 'k:{"port":80,"protocol":"TCP"}'])).toBe('.ports[port=80,protocol="TCP"]');
    expect(pathString(["f:finalizers", 'v:"a"'])).toBe('.finalizers[="a"]');
    expect(pathString(["f:args", "i:2"])).toBe(".args[2]");
  });

  it("refuses malformed FieldsV1", () => {
    expect(() => FieldSet.fromFieldsV1({ spec: {} })).toThrow(/invalid path element/);
    expect(() => FieldSet.fromFieldsV1({ "f:spec": 1 })).toThrow(/must be an object/);
    expect(() => FieldSet.fromFieldsV1({ "k:nope": {} })).toThrow(/invalid/);
  });

  it("differs, intersects and unions by member", () => {
    const a = fieldSetOf(["f:a"], ["f:b", "f:c"], ["f:b", "f:d"]);
    const b = fieldSetOf(["f:b", "f:c"], ["f:e"]);
    expect(a.difference(b).toFieldsV1()).toEqual({ "f:a": {}, "f:b": { "f:d": {} } });
    expect(a.intersection(b).toFieldsV1()).toEqual({ "f:b": { "f:c": {} } });
    expect(a.union(b).paths().map(pathString)).toEqual([".a", ".e", ".b.c", ".b.d"]);
    expect(
      fieldSetOf(["f:b"])
        .union(a)
        .recursiveDifference(fieldSetOf(["f:b"]))
        .toFieldsV1(),
    ).toEqual({ "f:a": {} });
  });
});

describe("toFieldSet", () => {
  it("owns the leaves, list items by merge key and map keys of a built-in configuration", () => {
    const set = toFieldSet(deployment(2) as unknown as Json, rootType(undefined, false));
    expect(set.toFieldsV1()).toEqual({
      "f:apiVersion": {},
      "f:kind": {},
      "f:metadata": { "f:name": {}, "f:namespace": {} },
      "f:spec": {
        "f:replicas": {},
        "f:selector": {},
        "f:template": {
          "f:metadata": { "f:labels": { "f:app": {} } },
          "f:spec": { "f:containers": { 'k:{"name":"nginx"}': { ".": {}, "f:image": {}, "f:name": {} } } },
        },
      },
    });
  });

  it("follows a CRD's list types, map types and key defaults", () => {
    const spec: JsonObject = {
      ports: [{ port: 80 }, { port: 53, protocol: "UDP" }],
      tags: ["a", "b"],
      args: ["x"],
      selector: { a: "b" },
      extra: { deep: { k: 1 } },
      empty: {},
    };
    const set = toFieldSet({ spec }, rootType(WIDGET_SCHEMA, true));
    expect(set.toFieldsV1()).toEqual({
      "f:spec": {
        "f:args": {},
        "f:empty": {},
        "f:extra": { "f:deep": { ".": {}, "f:k": {} } },
        "f:ports": {
          'k:{"port":53,"protocol":"UDP"}': { ".": {}, "f:port": {}, "f:protocol": {} },
          'k:{"port":80,"protocol":"TCP"}': { ".": {}, "f:port": {} },
        },
        "f:selector": {},
        "f:tags": { 'v:"a"': {}, 'v:"b"': {} },
      },
    });
  });

  it("refuses an associative-list item without its key, and duplicate keys", () => {
    const t = rootType(undefined, false);
    expect(() => toFieldSet({ spec: { containers: [{ image: "x" }] } }, t)).toThrow(
      /omits key field "name" \(and doesn't have default value\)/,
    );
    expect(() => toFieldSet({ spec: { containers: [{ name: "a" }, { name: "a" }] } }, t)).toThrow(
      /duplicate entries for key \[name="a"\]/,
    );
  });
});

describe("compare and merge", () => {
  const t = rootType(undefined, false);
  it("reports a new map or item as added itself, a change as modified", () => {
    const c = compare(
      { spec: { containers: [{ name: "a", image: "1" }] } },
      {
        spec: {
          containers: [
            { name: "a", image: "2" },
            { name: "b", image: "1" },
          ],
        },
        metadata: { labels: { x: "y" } },
      },
      t,
    );
    expect(c.modified.paths().map(pathString)).toEqual(['.spec.containers[name="a"].image']);
    expect(c.added.paths().map(pathString)).toEqual([
      ".metadata",
      ".metadata.labels",
      ".metadata.labels.x",
      '.spec.containers[name="b"]',
      '.spec.containers[name="b"].image',
      '.spec.containers[name="b"].name',
    ]);
    expect(c.removed.empty()).toBe(true);
  });

  it("merges associative lists by key and replaces atomic values", () => {
    const live = { spec: { containers: [{ name: "a", image: "1", env: [{ name: "X", value: "1" }] }], args: ["p"] } };
    const merged = mergeValues(
      live,
      {
        spec: {
          containers: [
            { name: "b", image: "2" },
            { name: "a", env: [{ name: "Y", value: "2" }] },
          ],
          args: ["q"],
        },
      },
      t,
    );
    expect(merged).toEqual({
      spec: {
        containers: [
          {
            name: "a",
            image: "1",
            env: [
              { name: "X", value: "1" },
              { name: "Y", value: "2" },
            ],
          },
          { name: "b", image: "2" },
        ],
        args: ["q"],
      },
    });
  });
});

describe("trackUpdate", () => {
  it("records a create by its manager, owning new objects of a custom resource as wholes", () => {
    const next = widget({ size: 1, ports: [{ port: 80, protocol: "TCP" }] });
    const mf = trackUpdate(
      { apiVersion: "example.com/v1", kind: "Widget" } as KubeObject,
      next,
      "kubectl-create",
      custom(),
      T0,
    );
    expect(mf).toEqual([
      {
        manager: "kubectl-create",
        operation: "Update",
        apiVersion: "example.com/v1",
        time: T0,
        fieldsType: "FieldsV1",
        fieldsV1: {
          "f:spec": {
            ".": {},
            "f:ports": { ".": {}, 'k:{"port":80,"protocol":"TCP"}': { ".": {}, "f:port": {}, "f:protocol": {} } },
            "f:size": {},
          },
        },
      },
    ]);
  });

  it("moves changed fields to the updater and drops removed ones; keeps the old time when nothing changed", () => {
    const created = widget(
      { size: 1, color: "red" },
      trackUpdate(
        { apiVersion: "example.com/v1", kind: "Widget" } as KubeObject,
        widget({ size: 1, color: "red" }),
        "a",
        custom(),
        T0,
      ),
    );
    const next = widget({ size: 2 });
    const mf = trackUpdate(created, next, "kubectl-edit", custom(), T1) as JsonObject[];
    expect(mf.map((e) => [e.manager, e.time, e.fieldsV1])).toEqual([
      ["a", T0, { "f:spec": {} }],
      ["kubectl-edit", T1, { "f:spec": { "f:size": {} } }],
    ]);
    const same = trackUpdate(
      { ...next, metadata: { ...next.metadata, managedFields: mf } },
      next,
      "kubectl-edit",
      custom(),
      "2030-01-01T00:00:00Z",
    );
    expect(same).toEqual(mf);
  });

  it("resets on [] or [{}], keeps the live fields when the request has none or bad ones", () => {
    const live = widget({ size: 1 }, [
      {
        manager: "a",
        operation: "Update",
        apiVersion: "example.com/v1",
        time: T0,
        fieldsType: "FieldsV1",
        fieldsV1: { "f:spec": { "f:size": {} } },
      },
    ]);
    expect(trackUpdate(live, widget({ size: 1 }, []), "b", custom(), T1)).toBeUndefined();
    expect(trackUpdate(live, widget({ size: 1 }, [{}]), "b", custom(), T1)).toBeUndefined();
    expect(trackUpdate(live, widget({ size: 1 }), "b", custom(), T1)).toEqual(live.metadata.managedFields);
    expect(trackUpdate(live, widget({ size: 1 }, [{ operation: "Nope" }]), "b", custom(), T1)).toEqual(
      live.metadata.managedFields,
    );
  });

  it("records a status write with its subresource and owns only status", () => {
    const live = { ...widget({ size: 1 }), status: { phase: "A" } };
    const next = { ...widget({ size: 1 }), status: { phase: "B" } };
    expect(trackUpdate(live, next, "virt-controller", custom("status"), T0)).toEqual([
      expect.objectContaining({
        manager: "virt-controller",
        subresource: "status",
        fieldsV1: { "f:status": { "f:phase": {} } },
      }),
    ]);
  });
  it("merges the oldest Update entries into ancient-changes beyond 10 managers", () => {
    let obj = widget({});
    for (let i = 0; i < 12; i++) {
      const next = widget({ ...(obj.spec as JsonObject), [`f${i}`]: i }, obj.metadata.managedFields);
      const time = `2026-01-01T00:00:${String(i).padStart(2, "0")}Z`;
      obj = { ...next, metadata: { ...next.metadata, managedFields: trackUpdate(obj, next, `m${i}`, custom(), time) } };
    }
    const mf = entries(obj);
    expect(mf).toHaveLength(10);
    // m0 and m1 merged when the 11th arrived, m2 with them when the 12th did; the bucket has the newest time.
    expect(mf.map((e) => e.manager)).toEqual(["ancient-changes", ...Array.from({ length: 9 }, (_, i) => `m${i + 3}`)]);
    expect(mf[0].time).toBe("2026-01-01T00:00:02Z");
    expect(Object.keys((mf[0].fieldsV1 as JsonObject)["f:spec"] as JsonObject)).toEqual(["f:f0", "f:f1", "f:f2"]);
  });
});

describe("applyConfig", () => {
  const liveBy = (manager: string, obj: KubeObject, scope: WriteScope): KubeObject => {
    const zero = {
      apiVersion: obj.apiVersion,
      kind: obj.kind,
      metadata: {},
      spec: { template: { metadata: {}, spec: {} } },
    } as KubeObject;
    return { ...obj, metadata: { ...obj.metadata, managedFields: trackUpdate(zero, obj, manager, scope, T0) } };
  };

  it("owns exactly the applied fields, with operation Apply", () => {
    const live = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "web", namespace: "default" },
    } as KubeObject;
    const { obj } = applyConfig(live, deployment(2) as unknown as JsonObject, "kubectl", false, builtin("apps/v1"), T0);
    expect(entries(obj)).toEqual([
      {
        manager: "kubectl",
        operation: "Apply",
        apiVersion: "apps/v1",
        time: T0,
        fieldsType: "FieldsV1",
        fieldsV1: {
          "f:spec": {
            "f:replicas": {},
            "f:selector": {},
            "f:template": {
              "f:metadata": { "f:labels": { "f:app": {} } },
              "f:spec": { "f:containers": { 'k:{"name":"nginx"}': { ".": {}, "f:image": {}, "f:name": {} } } },
            },
          },
        },
      },
    ]);
  });

  it("is a 409 with kube's message and causes when another manager owns a changed field", () => {
    const live = liveBy("kubectl-client-side-apply", deployment(1), builtin("apps/v1"));
    const err = conflictOf(() =>
      applyConfig(live, deployment(3) as unknown as JsonObject, "kubectl", false, builtin("apps/v1"), T1),
    );
    expect(err.code).toBe(409);
    expect(err.reason).toBe("Conflict");
    expect(err.message).toBe(
      'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using apps/v1: .spec.replicas',
    );
    expect(err.status.details).toEqual({
      causes: [
        {
          reason: "FieldManagerConflict",
          message: 'conflict with "kubectl-client-side-apply" using apps/v1',
          field: ".spec.replicas",
        },
      ],
    });
  });

  it("lists several conflicts per manager", () => {
    const live = liveBy("editor", deployment(1, "nginx:1"), builtin("apps/v1"));
    const err = conflictOf(() =>
      applyConfig(live, deployment(3, "nginx:2") as unknown as JsonObject, "ci", false, builtin("apps/v1"), T1),
    );
    expect(err.message).toBe(
      'Apply failed with 2 conflicts: conflicts with "editor" using apps/v1:\n- .spec.replicas\n- .spec.template.spec.containers[name="nginx"].image',
    );
    expect(err.status.details?.causes?.map((c) => c.field)).toEqual([
      ".spec.replicas",
      '.spec.template.spec.containers[name="nginx"].image',
    ]);
  });

  it("shares a field applied with the same value, and moves a forced one", () => {
    const live = liveBy("kubectl-client-side-apply", deployment(1), builtin("apps/v1"));
    const shared = applyConfig(
      live,
      deployment(1) as unknown as JsonObject,
      "kubectl",
      false,
      builtin("apps/v1"),
      T1,
    ).obj;
    const owners = (path: string[]): string[] =>
      decodeManagedFor(shared)
        .filter(([, s]) => s.has(path))
        .map(([m]) => m);
    expect(owners(["f:spec", "f:replicas"])).toEqual(["kubectl", "kubectl-client-side-apply"]);
    const forced = applyConfig(
      live,
      deployment(3) as unknown as JsonObject,
      "kubectl",
      true,
      builtin("apps/v1"),
      T1,
    ).obj;
    expect((forced.spec as JsonObject).replicas).toBe(3);
    const after = decodeManagedFor(forced);
    expect(after.filter(([, s]) => s.has(["f:spec", "f:replicas"])).map(([m]) => m)).toEqual(["kubectl"]);
    expect(after.find(([m]) => m === "kubectl-client-side-apply")?.[1].has(["f:spec", "f:selector"])).toBe(true);
  });

  it("removes a field the manager applied before and omits now, unless another manager owns it", () => {
    const first = applyConfig(
      widget({}),
      { apiVersion: "example.com/v1", kind: "Widget", spec: { size: 1, color: "red", tags: ["a"] } },
      "gitops",
      false,
      custom(),
      T0,
    ).obj;
    const second = applyConfig(
      first,
      { apiVersion: "example.com/v1", kind: "Widget", spec: { size: 1 } },
      "gitops",
      false,
      custom(),
      T1,
    ).obj;
    expect(second.spec).toEqual({ size: 1 });
    // Another manager that also applied color keeps it.
    const shared = applyConfig(
      first,
      { apiVersion: "example.com/v1", kind: "Widget", spec: { color: "red" } },
      "other",
      false,
      custom(),
      T0,
    ).obj;
    const third = applyConfig(
      shared,
      { apiVersion: "example.com/v1", kind: "Widget", spec: { size: 1 } },
      "gitops",
      false,
      custom(),
      T1,
    ).obj;
    expect(third.spec).toEqual({ size: 1, color: "red" });
  });

  it("keeps fields nobody applied (defaults) when pruning an item's siblings", () => {
    const live = {
      ...deployment(1),
      metadata: {
        name: "web",
        managedFields: [
          {
            manager: "kubectl",
            operation: "Apply",
            apiVersion: "apps/v1",
            fieldsType: "FieldsV1",
            fieldsV1: {
              "f:spec": {
                "f:replicas": {},
                "f:template": {
                  "f:spec": { "f:containers": { 'k:{"name":"nginx"}': { ".": {}, "f:image": {}, "f:name": {} } } },
                },
              },
            },
          },
        ],
      },
    } as KubeObject;
    (live.spec as { strategy?: Json }).strategy = { type: "RollingUpdate" };
    const { obj } = applyConfig(
      live,
      { apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "web" }, spec: { replicas: 1 } },
      "kubectl",
      false,
      builtin("apps/v1"),
      T1,
    );
    const spec = obj.spec as JsonObject;
    // The container goes as a whole; the pod spec it emptied goes too; the labels nobody applied stay.
    expect(spec.template).toEqual({ metadata: { labels: { app: "web" } } });
    expect(spec.strategy).toEqual({ type: "RollingUpdate" });
    expect(spec.selector).toEqual({ matchLabels: { app: "web" } });
  });

  it("treats keys named like Object.prototype members as plain fields (found by the API fuzz lane)", () => {
    const config = JSON.parse(
      '{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"type":{"constructor":[{"a":1}],"__proto__":{"x":1}},"spec":{"constructor":{"toString":1}}}',
    ) as JsonObject;
    const live = { apiVersion: "v1", kind: "Secret", metadata: { name: "s" } } as KubeObject;
    const { obj } = applyConfig(live, config, "m", false, builtin("v1"), T0);
    expect(Object.getPrototypeOf(obj.type)).toBe(Object.prototype);
    expect(JSON.stringify(obj.type)).toBe('{"constructor":[{"a":1}],"__proto__":{"x":1}}');
    expect(entries(obj)[0]?.fieldsV1).toEqual({
      "f:spec": { "f:constructor": { "f:toString": {} } },
      "f:type": { "f:__proto__": { "f:x": {} }, "f:constructor": {} },
    });
    const widgetLive = widget({ constructor: 1 });
    expect(() => trackUpdate(widgetLive, widget({ toString: 2 }), "m", custom(), T0)).not.toThrow();
  });

  it("answers 400 for a configuration that does not fit its type", () => {
    const err = conflictOf(() =>
      applyConfig(widget({}), { spec: { ports: [{ protocol: "UDP" }] } }, "m", false, custom(), T0),
    );
    expect(err.code).toBe(400);
    expect(err.message).toContain('omits key field "port"');
  });
});

function decodeManagedFor(obj: KubeObject): [string, FieldSet][] {
  return [...decodeManaged(obj.metadata.managedFields).values()].map((e) => [e.manager, e.set] as [string, FieldSet]);
}

describe("manager names and options", () => {
  it.each([
    [undefined, "kubectl/v1.32.4 (linux/amd64) kubernetes/abc", "kubectl"],
    ["kubectl-client-side-apply", "kubectl/v1.32.4", "kubectl-client-side-apply"],
    [undefined, "virt-controller/v1.5.0 (linux/amd64)", "virt-controller"],
    [undefined, "a\u0001b/x", "ab"],
    [undefined, "x".repeat(200), "x".repeat(128)],
    [undefined, undefined, ""],
  ])("fieldManager %j with User-Agent %j is %j", (fm, ua, want) => {
    expect(managerOf(fm, ua)).toBe(want);
  });

  it("validates fieldManager and force as kube's PatchOptions", () => {
    expect(() => validateWriteOptions("PatchOptions", undefined, { apply: true, forceSet: false })).toThrow(
      'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
    );
    expect(() => validateWriteOptions("PatchOptions", "m", { apply: false, forceSet: true })).toThrow(
      'PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch',
    );
    expect(() => validateWriteOptions("CreateOptions", "x".repeat(129))).toThrow(
      'CreateOptions.meta.k8s.io "" is invalid: fieldManager: Too long: may not be more than 128 bytes',
    );
    // The limit is in bytes: 43 three-byte runes are 129 bytes.
    expect(() => validateWriteOptions("UpdateOptions", "é".repeat(64))).not.toThrow();
    expect(() => validateWriteOptions("UpdateOptions", "€".repeat(43))).toThrow(/Too long/);
    expect(() => validateWriteOptions("UpdateOptions", "a\u0007b")).toThrow(
      'UpdateOptions.meta.k8s.io "" is invalid: fieldManager: Invalid value: "a\\ab": invalid character U+0007 (at position 1)',
    );
    expect(() => validateWriteOptions("UpdateOptions", "ok")).not.toThrow();
  });
});
