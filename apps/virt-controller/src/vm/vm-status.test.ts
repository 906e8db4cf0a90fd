import { newVm, newVmi, withPhase } from "@kvt/testing";
import { describe, expect, it } from "vitest";
import { remainingRequests } from "./vm-status.ts";

describe("stateChangeRequests", () => {
  it("drops a Start once a live VMI exists, and a Stop once the VMI is gone or replaced", () => {
    const vmi = newVmi("v", withPhase("Running"));
    const start = newVm("v", (vm) => (vm.status = { stateChangeRequests: [{ action: "Start" }] }));
    expect(remainingRequests(start, vmi)).toBeUndefined();
    expect(remainingRequests(start, undefined)).toEqual([{ action: "Start" }]);
    const stop = newVm(
      "v",
      (vm) => (vm.status = { stateChangeRequests: [{ action: "Stop", uid: "old" }, { action: "Start" }] }),
    );
    expect(remainingRequests(stop, vmi)).toEqual([{ action: "Start" }]);
  });
});
