import { describe, expect, it } from "vitest";
import { findCondition, setCondition } from "./conditions.ts";
import { formatBytes, parseQuantity } from "./quantity.ts";
import { uuidV5 } from "./uuid.ts";

describe("quantities", () => {
  it.each([
    ["128Mi", 128 * 2 ** 20],
    ["1Gi", 2 ** 30],
    ["1G", 1e9],
    ["100m", 0.1],
    ["2", 2],
    ["1e3", 1000],
  ])("parseQuantity(%s)", (q, v) => expect(parseQuantity(q)).toBeCloseTo(v));
  it("rejects garbage", () => expect(() => parseQuantity("1 GB")).toThrow(TypeError));
  it("formats bytes", () => {
    expect(formatBytes(2 ** 30 + 2 ** 20)).toBe("1025Mi");
    expect(formatBytes(1000)).toBe("1000");
  });
});

describe("uuidV5", () => {
  it("matches RFC 4122's DNS example", () => {
    expect(uuidV5("6ba7b810-9dad-11d1-80b4-00c04fd430c8", "www.example.com")).toBe(
      "2ed6657d-e927-568b-95e1-2665a8aea6a2",
    );
  });
});

describe("setCondition", () => {
  it("keeps lastTransitionTime while the status stays the same", () => {
    const a = setCondition([], { type: "Ready", status: "False" }, "t1");
    const b = setCondition(a, { type: "Ready", status: "False", reason: "X" }, "t2");
    expect(findCondition(b, "Ready")?.lastTransitionTime).toBe("t1");
    const c = setCondition(b, { type: "Ready", status: "True" }, "t3");
    expect(findCondition(c, "Ready")?.lastTransitionTime).toBe("t3");
  });
});
