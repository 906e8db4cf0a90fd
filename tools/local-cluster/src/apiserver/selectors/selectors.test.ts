import { describe, expect, it } from "vitest";
import { ApiError } from "../errors.ts";
import { matchFields, parseFieldSelector, pathGetter } from "./fields.ts";
import { fromLabelSelectorObject, matchLabels, parseLabelSelector } from "./labels.ts";

describe("label selectors", () => {
  const cases: [string, Record<string, string>, boolean][] = [
    ["app=a", { app: "a" }, true],
    ["app==a", { app: "b" }, false],
    ["app!=a", {}, true],
    ["app!=a", { app: "a" }, false],
    ["app in (a, b)", { app: "b" }, true],
    ["app in (a,b)", {}, false],
    ["app notin (a,b)", {}, true],
    ["app notin (a,b)", { app: "a" }, false],
    ["app", { app: "" }, true],
    ["!app", { app: "x" }, false],
    ["app in (a,b),!foo,tier=x", { app: "a", tier: "x" }, true],
    ["example.com/role=db", { "example.com/role": "db" }, true],
    ["n>3", { n: "4" }, true],
  ];
  it.each(cases)("%s on %j is %s", (sel, labels, want) => {
    expect(matchLabels(parseLabelSelector(sel), labels)).toBe(want);
  });
  it("rejects malformed selectors with 400", () => {
    for (const bad of ["app=(", "a b", "in (x)", ",", "app=a,"]) {
      expect(() => parseLabelSelector(bad), bad).toThrow(ApiError);
    }
  });
  it("reads the object form", () => {
    const sel = fromLabelSelectorObject({
      matchLabels: { a: "1" },
      matchExpressions: [{ key: "b", operator: "NotIn", values: ["x"] }],
    });
    expect(matchLabels(sel, { a: "1" })).toBe(true);
    expect(matchLabels(sel, { a: "1", b: "x" })).toBe(false);
  });
});

describe("field selectors", () => {
  const getters = new Map([
    ["metadata.name", pathGetter("metadata.name")],
    ["spec.nodeName", pathGetter("spec.nodeName")],
    ["status.phase", pathGetter("status.phase")],
  ]);
  const pod = { metadata: { name: "p,1" }, spec: { nodeName: "n1" }, status: { phase: "Running" } };
  it("matches =, == and != with escapes", () => {
    expect(
      matchFields(parseFieldSelector("spec.nodeName=n1,status.phase!=Failed", new Set(getters.keys())), pod, getters),
    ).toBe(true);
    expect(matchFields(parseFieldSelector("metadata.name==p\\,1", new Set(getters.keys())), pod, getters)).toBe(true);
    expect(matchFields(parseFieldSelector("spec.nodeName=", new Set(getters.keys())), pod, getters)).toBe(false);
  });
  it("rejects unsupported fields with Kubernetes' message", () => {
    expect(() => parseFieldSelector("spec.foo=x", new Set(getters.keys()))).toThrow(
      "field label not supported: spec.foo",
    );
  });
});
