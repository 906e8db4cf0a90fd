import { findCondition } from "@kvt/api";
import { describe, expect, it } from "vitest";
import { setCondition } from "./conditions.ts";

describe("setCondition", () => {
  it("keeps lastTransitionTime while the status stays the same", () => {
    const a = setCondition([], { type: "Ready", status: "False" }, "t1");
    const b = setCondition(a, { type: "Ready", status: "False", reason: "X" }, "t2");
    expect(findCondition(b, "Ready")?.lastTransitionTime).toBe("t1");
    const c = setCondition(b, { type: "Ready", status: "True" }, "t3");
    expect(findCondition(c, "Ready")?.lastTransitionTime).toBe("t3");
  });
});
