import { describe, expect, it } from "vitest";
import { findCondition, hasCondition, removeCondition, setCondition } from "./conditions.ts";

describe("setCondition", () => {
  it("keeps lastTransitionTime while the status stays the same", () => {
    const a = setCondition([], { type: "Ready", status: "False" }, "t1");
    const b = setCondition(a, { type: "Ready", status: "False", reason: "X" }, "t2");
    expect(findCondition(b, "Ready")?.lastTransitionTime).toBe("t1");
    const c = setCondition(b, { type: "Ready", status: "True" }, "t3");
    expect(findCondition(c, "Ready")?.lastTransitionTime).toBe("t3");
  });

  it("updates a condition where it is and appends a new one, so an unchanged list keeps its order", () => {
    const list = [
      { type: "PodScheduled", status: "True" as const, lastTransitionTime: "t0" },
      { type: "Ready", status: "True" as const, lastTransitionTime: "t0" },
      { type: "LiveMigratable", status: "True" as const, lastTransitionTime: "t0" },
    ];
    expect(setCondition(list, { type: "PodScheduled", status: "True" }, "t1")).toEqual(list);
    expect(setCondition(list, { type: "Ready", status: "False" }, "t1").map((c) => c.type)).toEqual([
      "PodScheduled",
      "Ready",
      "LiveMigratable",
    ]);
    expect(setCondition(list, { type: "Paused", status: "True" }, "t1").map((c) => c.type)).toEqual([
      "PodScheduled",
      "Ready",
      "LiveMigratable",
      "Paused",
    ]);
  });

  it("removes every condition of a type, and reads a condition's status", () => {
    const list = [
      { type: "Ready", status: "True" as const },
      { type: "Paused", status: "False" as const },
    ];
    expect(removeCondition(list, "Ready")).toEqual([{ type: "Paused", status: "False" }]);
    expect(removeCondition(undefined, "Ready")).toEqual([]);
    expect(hasCondition(list, "Ready")).toBe(true);
    expect(hasCondition(list, "Paused")).toBe(false);
    expect(hasCondition(list, "Paused", "False")).toBe(true);
  });
});
