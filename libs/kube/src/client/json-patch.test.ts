import { describe, expect, it } from "vitest";
import { deepEqual, patchField, pointer } from "./json-patch.ts";
import { resourcePath } from "./resource-client.ts";
import { describePath } from "./rest-client.ts";

describe("json patch helpers", () => {
  it("escapes pointer segments", () => {
    expect(pointer("metadata", "labels", "kubevirt.io/x~y")).toBe("/metadata/labels/kubevirt.io~1x~0y");
  });

  it.each([
    ["equal values", { a: 1 }, { a: 1 }, []],
    ["absent -> add", undefined, 2, [{ op: "add", path: "/p", value: 2 }]],
    [
      "present -> test + replace",
      1,
      2,
      [
        { op: "test", path: "/p", value: 1 },
        { op: "replace", path: "/p", value: 2 },
      ],
    ],
    [
      "present -> test + remove",
      1,
      undefined,
      [
        { op: "test", path: "/p", value: 1 },
        { op: "remove", path: "/p" },
      ],
    ],
  ])("patchField: %s", (_name, oldV, newV, ops) => {
    expect(patchField("/p", oldV, newV)).toEqual(ops);
  });

  it("deepEqual ignores key order and undefined members", () => {
    expect(deepEqual({ a: 1, b: [1, { c: 2 }] }, { b: [1, { c: 2 }], a: 1, d: undefined })).toBe(true);
    expect(deepEqual([1, 2], [2, 1])).toBe(false);
  });
});

describe("paths", () => {
  const vmis = {
    group: "kubevirt.io",
    version: "v1",
    plural: "virtualmachineinstances",
    kind: "VirtualMachineInstance",
    namespaced: true,
  };
  const nodes = { group: "", version: "v1", plural: "nodes", kind: "Node", namespaced: false };

  it("builds namespaced, cluster-wide and subresource paths", () => {
    expect(resourcePath(vmis, "ns", "a", "status")).toBe(
      "/apis/kubevirt.io/v1/namespaces/ns/virtualmachineinstances/a/status",
    );
    expect(resourcePath(vmis)).toBe("/apis/kubevirt.io/v1/virtualmachineinstances");
    expect(resourcePath(nodes, "ignored", "n1")).toBe("/api/v1/nodes/n1");
  });

  it.each([
    ["GET", "/api/v1/namespaces/d/pods", {}, { resource: "pods", verb: "LIST" }],
    ["GET", "/api/v1/namespaces/d/pods", { watch: true }, { resource: "pods", verb: "WATCH" }],
    ["POST", "/api/v1/namespaces/d/pods", {}, { resource: "pods", verb: "CREATE" }],
    [
      "PATCH",
      "/apis/kubevirt.io/v1/namespaces/d/virtualmachineinstances/x/status",
      {},
      { resource: "virtualmachineinstances/status", verb: "PATCH" },
    ],
    [
      "PUT",
      "/apis/kubevirt.io/v1/namespaces/d/virtualmachineinstances/x",
      {},
      { resource: "virtualmachineinstances", verb: "UPDATE" },
    ],
    ["GET", "/api/v1/nodes/n1", {}, { resource: "nodes", verb: "GET" }],
  ])("describePath %s %s", (method, path, query, expected) => {
    expect(describePath(path, method, query)).toEqual(expected);
  });
});

describe("diffMembers", () => {
  it("tests and replaces only changed members, adds new ones, and adds the whole object when absent", async () => {
    const { diffMembers } = await import("./json-patch.ts");
    expect(diffMembers("/status", { phase: "Pending", a: 1 }, { phase: "Scheduling", a: 1, nodeName: "n" })).toEqual([
      { op: "test", path: "/status/phase", value: "Pending" },
      { op: "replace", path: "/status/phase", value: "Scheduling" },
      { op: "add", path: "/status/nodeName", value: "n" },
    ]);
    expect(diffMembers("/status", undefined, { phase: "Pending" })).toEqual([
      { op: "add", path: "/status", value: { phase: "Pending" } },
    ]);
  });
});
