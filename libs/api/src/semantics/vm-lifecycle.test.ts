import { describe, expect, it } from "vitest";
import type { RunStrategy } from "../constants.ts";
import { vm as newVm, vmi as newVmi } from "../testdata/objects.ts";
import type { VirtualMachine, VirtualMachineInstance } from "../types.ts";
import { changeRequestPatch, MANUAL_RECOVERY_REQUIRED, planRestart, planStart, planStop } from "./vm-lifecycle.ts";

const C = (msg: string) => ({
  code: 409,
  reason: "Conflict",
  message: `Operation cannot be fulfilled on virtualmachine.kubevirt.io "testvm": ${msg}`,
});

function vmWith(strategy: RunStrategy, status?: VirtualMachine["status"]): VirtualMachine {
  const v = newVm();
  v.spec.runStrategy = strategy;
  if (status) v.status = status;
  return v;
}

function vmiIn(phase: string | undefined): VirtualMachineInstance | undefined {
  if (phase === undefined) return undefined;
  const v = newVmi("testvm");
  v.metadata = { ...v.metadata, uid: "vmi-uid" };
  v.status = { phase: phase as "Running" };
  return v;
}

const startReq = { action: "Start" };
const stopReq = { action: "Stop", uid: "vmi-uid" };
const toAlways = [
  { op: "test", path: "/spec/runStrategy", value: "Halted" },
  { op: "replace", path: "/spec/runStrategy", value: "Always" },
];
const addRequests = (...r: unknown[]) => [{ op: "add", path: "/status", value: { stateChangeRequests: r } }];

describe("planStart(): what start means per run strategy", () => {
  it.each<[RunStrategy, string | undefined, unknown]>([
    ["Always", undefined, { ok: false, error: C("Always does not support manual start requests") }],
    ["Once", undefined, { ok: false, error: C("Once does not support manual start requests") }],
    ["Always", "Running", { ok: false, error: C("VM is already running") }],
    ["Manual", "Scheduling", { ok: false, error: C("VM is already running") }],
    ["Halted", undefined, { ok: true, plan: { vmPatch: toAlways } }],
    ["Halted", "Succeeded", { ok: true, plan: { vmPatch: toAlways } }],
    ["Manual", undefined, { ok: true, plan: { vmStatusPatch: addRequests(startReq) } }],
    ["Manual", "Failed", { ok: true, plan: { vmStatusPatch: addRequests(stopReq, startReq) } }],
    ["Manual", "Unknown", { ok: true, plan: { vmStatusPatch: addRequests(startReq) } }],
    ["RerunOnFailure", undefined, { ok: true, plan: { vmStatusPatch: addRequests(startReq) } }],
    ["RerunOnFailure", "Succeeded", { ok: true, plan: { vmStatusPatch: addRequests(stopReq, startReq) } }],
    [
      "RerunOnFailure",
      "Failed",
      { ok: false, error: C("RerunOnFailure does not support starting VM from failed state") },
    ],
  ])("%s with VMI phase %s", (strategy, phase, want) => {
    expect(planStart(vmWith(strategy), vmiIn(phase))).toEqual(want);
  });

  it("a paused start of a Halted VM goes through a Start request carrying paused=true", () => {
    expect(planStart(vmWith("Halted"), undefined, { paused: true })).toEqual({
      ok: true,
      plan: { vmStatusPatch: addRequests({ action: "Start", data: { paused: "true" } }) },
    });
  });

  it("a VM needing manual recovery cannot start", () => {
    const v = vmWith("Halted", { conditions: [{ type: "ManualRecoveryRequired", status: "True" }] });
    expect(planStart(v, undefined)).toEqual({ ok: false, error: C(MANUAL_RECOVERY_REQUIRED) });
  });

  it("running: false is Halted, and the patch flips `running`", () => {
    const v = newVm();
    delete v.spec.runStrategy;
    v.spec.running = false;
    expect(planStart(v, undefined)).toEqual({
      ok: true,
      plan: {
        vmPatch: [
          { op: "test", path: "/spec/running", value: false },
          { op: "replace", path: "/spec/running", value: true },
        ],
      },
    });
  });
});

describe("planStop(): what stop means per run strategy", () => {
  const toHalted = (from: string) => [
    { op: "test", path: "/spec/runStrategy", value: from },
    { op: "replace", path: "/spec/runStrategy", value: "Halted" },
  ];
  it.each<[RunStrategy, string | undefined, { gracePeriod?: number }, unknown]>([
    ["Always", "Running", {}, { ok: true, plan: { vmPatch: toHalted("Always") } }],
    ["Once", undefined, {}, { ok: true, plan: { vmPatch: toHalted("Once") } }],
    [
      "Always",
      "Running",
      { gracePeriod: 5 },
      { ok: true, plan: { vmiGracePeriodSeconds: 5, vmPatch: toHalted("Always") } },
    ],
    ["Manual", "Running", {}, { ok: true, plan: { vmStatusPatch: addRequests(stopReq) } }],
    ["RerunOnFailure", "Running", {}, { ok: true, plan: { vmStatusPatch: addRequests(stopReq) } }],
    ["Manual", undefined, {}, { ok: false, error: C("VM is not running") }],
    ["RerunOnFailure", "Succeeded", {}, { ok: false, error: C("VM is not running") }],
    ["Halted", undefined, {}, { ok: false, error: C("VM is not running") }],
    [
      "Halted",
      "Running",
      {},
      { ok: false, error: C("Halted only supports manual stop requests with a shorter graceperiod") },
    ],
    [
      "Halted",
      "Running",
      { gracePeriod: 0 },
      { ok: true, plan: { vmiGracePeriodSeconds: 0, vmStatusPatch: addRequests(stopReq) } },
    ],
  ])("%s with VMI phase %s and %j", (strategy, phase, opts, want) => {
    expect(planStop(vmWith(strategy), vmiIn(phase), opts)).toEqual(want);
  });

  it("Halted refuses a grace period that is not shorter than the VMI's", () => {
    const v = vmiIn("Running");
    if (v) v.spec.terminationGracePeriodSeconds = 10;
    expect(planStop(vmWith("Halted"), v, { gracePeriod: 10 })).toEqual({
      ok: false,
      error: C("Halted only supports manual stop requests with a shorter graceperiod"),
    });
    expect(planStop(vmWith("Halted"), v, { gracePeriod: 9 }).ok).toBe(true);
  });
});

describe("planRestart(): what restart means per run strategy", () => {
  it.each<[RunStrategy, string | undefined, { gracePeriodSeconds?: number }, unknown]>([
    ["Always", "Running", {}, { ok: true, plan: { vmStatusPatch: addRequests(stopReq, startReq) } }],
    ["Manual", "Running", {}, { ok: true, plan: { vmStatusPatch: addRequests(stopReq, startReq) } }],
    ["RerunOnFailure", "Failed", {}, { ok: true, plan: { vmStatusPatch: addRequests(stopReq, startReq) } }],
    [
      "Always",
      "Running",
      { gracePeriodSeconds: 0 },
      { ok: true, plan: { vmiGracePeriodSeconds: 1, vmStatusPatch: addRequests(stopReq, startReq) } },
    ],
    ["Halted", "Running", {}, { ok: false, error: C("RunStategy Halted does not support manual restart requests") }],
    ["Once", "Running", {}, { ok: false, error: C("RunStategy Once does not support manual restart requests") }],
    ["Always", undefined, {}, { ok: false, error: C("VM is not running: Halted") }],
    [
      "Always",
      "Running",
      { gracePeriodSeconds: 5 },
      {
        ok: false,
        error: {
          code: 400,
          reason: "BadRequest",
          message: "For force restart, only gracePeriod=0 is supported for now",
        },
      },
    ],
    [
      "Always",
      "Running",
      { gracePeriodSeconds: -1 },
      { ok: false, error: { code: 400, reason: "BadRequest", message: "gracePeriod has to be greater or equal to 0" } },
    ],
  ])("%s with VMI phase %s and %j", (strategy, phase, opts, want) => {
    expect(planRestart(vmWith(strategy), vmiIn(phase), opts)).toEqual(want);
  });

  it("a VM with VolumesChange=True cannot restart", () => {
    const v = vmWith("Always", { conditions: [{ type: "VolumesChange", status: "True" }] });
    expect(planRestart(v, vmiIn("Running"))).toEqual({ ok: false, error: C(MANUAL_RECOVERY_REQUIRED) });
  });
});

describe("changeRequestPatch(): the status patch virt-api sends", () => {
  it("guards an existing list with a test, and clears startFailure", () => {
    const v = vmWith("Manual", { printableStatus: "Stopped", startFailure: { consecutiveFailCount: 2 } });
    expect(changeRequestPatch(v, [{ action: "Start" }])).toEqual([
      { op: "test", path: "/status/stateChangeRequests", value: null },
      { op: "add", path: "/status/stateChangeRequests", value: [{ action: "Start" }] },
      { op: "remove", path: "/status/startFailure" },
    ]);
  });

  it("a Stop replaces pending requests; anything else while requests are pending is a 500", () => {
    const v = vmWith("Manual", { stateChangeRequests: [{ action: "Start" }] });
    expect(changeRequestPatch(v, [{ action: "Stop", uid: "u" }])).toEqual([
      { op: "test", path: "/status/stateChangeRequests", value: [{ action: "Start" }] },
      { op: "replace", path: "/status/stateChangeRequests", value: [{ action: "Stop", uid: "u" }] },
    ]);
    expect(changeRequestPatch(v, [{ action: "Start" }])).toEqual({
      code: 500,
      reason: "InternalError",
      message: "Internal error occurred: unable to complete request: stop/start already underway",
    });
  });
});
