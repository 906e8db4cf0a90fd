import { describe, expect, it } from "vitest";
import { longestGap } from "./outage.ts";

describe("longestGap()", () => {
  it("finds the longest silence between replies inside the window and where it began", () => {
    const replies = [0, 20, 40, 60, 260, 280, 300, 900];
    expect(longestGap(replies, 0, 400)).toEqual({ ms: 200, startMs: 60 });
    // The window leaves the later silence (300 -> 900) out.
    expect(longestGap(replies, 50, 310).ms).toBe(200);
    expect(longestGap([], 0, 10)).toEqual({ ms: 0, startMs: 0 });
  });
});
