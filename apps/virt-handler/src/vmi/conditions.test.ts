import type { Condition } from "@kvt/api";
import { describe, expect, it } from "vitest";
import { setCondition } from "./conditions.ts";

const T0 = "2026-01-01T00:00:00Z";
const T1 = "2026-01-01T00:01:00Z";
const list: Condition[] = [
  { type: "Ready", status: "True", lastTransitionTime: T0 },
  { type: "LiveMigratable", status: "True", lastTransitionTime: T0 },
  { type: "Synchronized", status: "True", lastTransitionTime: T0 },
];

describe("setCondition", () => {
  it("updates an existing condition in place, keeping the order another writer chose", () => {
    const out = setCondition(list, "Ready", { type: "Ready", status: "False", reason: "GuestNotRunning" }, T1);
    expect(out.map((c) => c.type)).toEqual(["Ready", "LiveMigratable", "Synchronized"]);
    expect(out[0]).toEqual({ type: "Ready", status: "False", reason: "GuestNotRunning", lastTransitionTime: T1 });
  });

  it("keeps the transition time while the status stays, appends a new type, removes on undefined", () => {
    expect(setCondition(list, "Ready", { type: "Ready", status: "True" }, T1)[0]?.lastTransitionTime).toBe(T0);
    const added = setCondition(list, "Paused", { type: "Paused", status: "True", reason: "PausedByUser" }, T1);
    expect(added.map((c) => c.type)).toEqual(["Ready", "LiveMigratable", "Synchronized", "Paused"]);
    expect(setCondition(list, "LiveMigratable", undefined, T1).map((c) => c.type)).toEqual(["Ready", "Synchronized"]);
  });
});
