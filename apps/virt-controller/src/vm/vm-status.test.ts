import type { VirtualMachineInstance } from "@kvt/api";
import { newVm, newVmi, type Option, withPhase, withRunStrategy } from "@kvt/testing";
import { describe, expect, it } from "vitest";
import { crashLoopDelaySeconds, nextStartFailure } from "./crash-loop.ts";
import { printableStatus, remainingRequests } from "./vm-status.ts";

const now = Date.parse("2026-01-01T00:00:00Z");
const cond =
  (type: string, status: string, reason?: string): Option<VirtualMachineInstance> =>
  (v) => {
    v.status = {
      ...v.status,
      conditions: [...(v.status?.conditions ?? []), { type, status, ...(reason ? { reason } : {}) }],
    };
  };
const deleting = <T extends { metadata?: { deletionTimestamp?: string } }>(o: T): void => {
  o.metadata ??= {};
  o.metadata.deletionTimestamp = "2026-01-01T00:00:00Z";
};

describe("printableStatus precedence", () => {
  it.each([
    ["VM being deleted", newVm("v", deleting), newVmi("v", withPhase("Running")), "Terminating"],
    ["VMI being deleted", newVm("v"), newVmi("v", withPhase("Running"), deleting), "Stopping"],
    ["Halted with a running VMI", newVm("v", withRunStrategy("Halted")), newVmi("v", withPhase("Running")), "Stopping"],
    [
      "migrating",
      newVm("v"),
      newVmi("v", withPhase("Running"), (x) => (x.status!.migrationState = { startTimestamp: "t" })),
      "Migrating",
    ],
    ["paused", newVm("v"), newVmi("v", withPhase("Running"), cond("Paused", "True")), "Paused"],
    ["running", newVm("v"), newVmi("v", withPhase("Running")), "Running"],
    [
      "unschedulable",
      newVm("v"),
      newVmi("v", withPhase("Scheduling"), cond("PodScheduled", "False", "Unschedulable")),
      "ErrorUnschedulable",
    ],
    ["starting", newVm("v"), newVmi("v", withPhase("Scheduling")), "Starting"],
    [
      "crash loop",
      newVm(
        "v",
        (vm) =>
          (vm.status = { startFailure: { consecutiveFailCount: 1, retryAfterTimestamp: "2026-01-01T00:01:00Z" } }),
      ),
      undefined,
      "CrashLoopBackOff",
    ],
    ["no VMI", newVm("v"), undefined, "Stopped"],
    ["VMI Succeeded", newVm("v"), newVmi("v", withPhase("Succeeded")), "Stopped"],
  ] as const)("%s -> %s", (_n, vm, vmi, expected) => {
    expect(printableStatus(vm, vmi, now)).toBe(expected);
  });
});

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

describe("crash-loop backoff", () => {
  it.each([
    [1, 0, 10],
    [2, 0, 40],
    [3, 0, 90],
    [6, 0, 300],
    [1, 0.99, 15],
  ])("failCount %i, random %f -> %i s", (count, random, seconds) => {
    expect(crashLoopDelaySeconds(count, random)).toBe(seconds);
  });

  it("counts a VMI that failed without running once, and clears the record when one runs", () => {
    const vm = newVm("v");
    const failed = newVmi("v", withPhase("Failed"));
    const first = nextStartFailure(vm, failed, now, () => 0);
    expect(first).toMatchObject({ consecutiveFailCount: 1, retryAfterTimestamp: "2026-01-01T00:00:10.000Z" });
    expect(nextStartFailure({ ...vm, status: { startFailure: first } }, failed, now)).toBe(first);
    expect(
      nextStartFailure({ ...vm, status: { startFailure: first } }, newVmi("v", withPhase("Running")), now),
    ).toBeUndefined();
    const ranThenFailed = newVmi("v", withPhase("Failed"), (v) => {
      v.status!.phaseTransitionTimestamps = [{ phase: "Running", phaseTransitionTimestamp: "t" }];
    });
    expect(nextStartFailure(vm, ranThenFailed, now)).toBeUndefined();
  });
});
