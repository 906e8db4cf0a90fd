import { describe, expect, it } from "vitest";
import { ApiError } from "../errors.ts";
import { applyJsonPatch, parseJsonPatch } from "./json-patch.ts";
import { mergePatch } from "./merge-patch.ts";
import { strategicMerge } from "./strategic-merge.ts";

describe("JSON merge patch (RFC 7386)", () => {
  it("merges objects, deletes with null and replaces lists", () => {
    expect(mergePatch({ a: 1, b: { c: 2, d: 3 }, l: [1, 2] }, { b: { c: null, e: 4 }, l: [3] })).toEqual({
      a: 1,
      b: { d: 3, e: 4 },
      l: [3],
    });
  });
});

describe("JSON patch (RFC 6902)", () => {
  const doc = { spec: { list: ["a", "b"], n: 1 } };
  it("applies add/remove/replace/move/copy/test", () => {
    const out = applyJsonPatch(
      doc,
      parseJsonPatch([
        { op: "test", path: "/spec/n", value: 1 },
        { op: "add", path: "/spec/list/-", value: "c" },
        { op: "remove", path: "/spec/list/0" },
        { op: "replace", path: "/spec/n", value: 2 },
        { op: "copy", from: "/spec/n", path: "/spec/m" },
        { op: "move", from: "/spec/m", path: "/spec/k~1x" },
      ]),
    );
    expect(out).toEqual({ spec: { list: ["b", "c"], n: 2, "k/x": 2 } });
    expect(doc.spec.list).toEqual(["a", "b"]);
  });
  it("fails a test op and a missing path with 422, a malformed document with 400", () => {
    const code = (f: () => unknown): number | undefined => {
      try {
        f();
      } catch (e) {
        return (e as ApiError).code;
      }
      return undefined;
    };
    expect(code(() => applyJsonPatch(doc, parseJsonPatch([{ op: "test", path: "/spec/n", value: 9 }])))).toBe(422);
    expect(code(() => applyJsonPatch(doc, parseJsonPatch([{ op: "replace", path: "/spec/zz/y", value: 9 }])))).toBe(
      422,
    );
    expect(code(() => parseJsonPatch({ spec: {} }))).toBe(400);
    expect(code(() => parseJsonPatch([{ op: "frob", path: "/x" }]))).toBe(400);
  });
});

describe("strategic merge patch", () => {
  it("merges containers by name and conditions by type, and honours $patch directives", () => {
    const pod = {
      spec: {
        containers: [
          { name: "a", image: "x" },
          { name: "b", image: "y" },
        ],
      },
      status: { conditions: [{ type: "Ready", status: "False" }] },
      metadata: { finalizers: ["f1"] },
    };
    const out = strategicMerge(pod, {
      spec: {
        containers: [
          { name: "b", image: "z" },
          { name: "a", $patch: "delete" },
        ],
      },
      status: {
        conditions: [
          { type: "Ready", status: "True" },
          { type: "Initialized", status: "True" },
        ],
      },
      metadata: { finalizers: ["f2"] },
    });
    expect(out).toEqual({
      spec: { containers: [{ name: "b", image: "z" }] },
      status: {
        conditions: [
          { type: "Ready", status: "True" },
          { type: "Initialized", status: "True" },
        ],
      },
      // apimachinery puts the patch's new finalizer before the server's (see the order tests below).
      metadata: { finalizers: ["f2", "f1"] },
    });
  });
  // Expected values from k8s.io/apimachinery v0.37.2 strategicpatch.StrategicMergePatch on a corev1.Pod.
  const c = (type: string, status: string) => ({ type, status });
  it.each([
    [
      "kwok's pod-ready patch onto a scheduled pod",
      { status: { conditions: [c("PodScheduled", "True")] } },
      { status: { conditions: [c("Initialized", "True"), c("Ready", "True"), c("ContainersReady", "True")] } },
      {
        status: {
          conditions: [
            c("Initialized", "True"),
            c("Ready", "True"),
            c("ContainersReady", "True"),
            c("PodScheduled", "True"),
          ],
        },
      },
    ],
    [
      "a new entry and an updated one, interleaved with the server's by their old positions",
      { status: { conditions: [c("A", "1"), c("B", "1"), c("C", "1")] } },
      { status: { conditions: [c("D", "2"), c("B", "2")] } },
      { status: { conditions: [c("D", "2"), c("A", "1"), c("B", "2"), c("C", "1")] } },
    ],
    [
      "existing entries patched in reverse order",
      { status: { conditions: [c("A", "1"), c("B", "1"), c("C", "1")] } },
      { status: { conditions: [c("C", "2"), c("A", "2")] } },
      { status: { conditions: [c("B", "1"), c("C", "2"), c("A", "2")] } },
    ],
    [
      "$setElementOrder alone reorders",
      { status: { conditions: [c("A", "1"), c("B", "1"), c("C", "1")] } },
      { status: { "$setElementOrder/conditions": [{ type: "C" }, { type: "B" }, { type: "A" }] } },
      { status: { conditions: [c("C", "1"), c("B", "1"), c("A", "1")] } },
    ],
    [
      "finalizers (a set): the patch's first",
      { metadata: { finalizers: ["a", "b", "c"] } },
      { metadata: { finalizers: ["d", "b"] } },
      { metadata: { finalizers: ["d", "a", "b", "c"] } },
    ],
    [
      "$setElementOrder on finalizers",
      { metadata: { finalizers: ["a", "b", "c"] } },
      { metadata: { "$setElementOrder/finalizers": ["c", "a", "b"] } },
      { metadata: { finalizers: ["c", "a", "b"] } },
    ],
  ])("orders merged lists as apimachinery does: %s", (_, target, patch, want) => {
    expect(strategicMerge(target, patch)).toEqual(want);
  });
  it("replaces with $patch: replace", () => {
    expect(strategicMerge({ a: { b: 1, c: 2 } }, { a: { $patch: "replace", d: 3 } })).toEqual({ a: { d: 3 } });
  });
  it("is an ApiError-free pure function on scalars", () => {
    expect(strategicMerge({ a: 1 }, { a: null })).toEqual({});
    expect(ApiError).toBeDefined();
  });
});
