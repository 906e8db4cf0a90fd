import { describe, expect, it } from "vitest";
import { cloneJson, jsonEqual } from "./types.ts";

describe("cloneJson", () => {
  it("copies deeply: changing the copy leaves the source alone", () => {
    const src = { metadata: { labels: { a: "1" } }, spec: { list: [{ x: 1 }, null, "s"], n: 0, b: false } };
    const copy = cloneJson(src);
    expect(copy).toEqual(src);
    copy.metadata.labels.a = "2";
    (copy.spec.list[0] as { x: number }).x = 2;
    expect(src.metadata.labels.a).toBe("1");
    expect(src.spec.list[0]).toEqual({ x: 1 });
  });

  it('keeps a parsed "__proto__" key as data, never as the prototype', () => {
    const src = JSON.parse('{"__proto__":{"polluted":true},"a":1}') as Record<string, unknown>;
    const copy = cloneJson(src);
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
    expect(Object.hasOwn(copy, "__proto__")).toBe(true);
    expect((copy as { polluted?: boolean }).polluted).toBeUndefined();
    expect(JSON.stringify(copy)).toBe(JSON.stringify(src));
  });
});

describe("jsonEqual", () => {
  it.each([
    [{ a: 1, b: [1, { c: "x" }] }, { b: [1, { c: "x" }], a: 1 }, true],
    [{ a: 1, u: undefined }, { a: 1 }, true],
    [{ a: 1 }, { a: 1, b: 2 }, false],
    [{ a: 1, b: 2 }, { a: 1 }, false],
    [{ a: [1, 2] }, { a: [2, 1] }, false],
    [{ a: [] }, { a: {} }, false],
    [{ a: null }, { a: {} }, false],
    [{ a: 1 }, { a: "1" }, false],
    [{ toString: 1 }, {}, false],
    [[1, [2]], [1, [2]], true],
  ])("jsonEqual(%j, %j) is %s", (a, b, want) => {
    expect(jsonEqual(a, b)).toBe(want);
    expect(jsonEqual(b, a)).toBe(want);
  });
});
