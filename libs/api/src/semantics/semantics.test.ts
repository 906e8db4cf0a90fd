import { describe, expect, it } from "vitest";
import { vm as newVm, vmi as newVmi } from "../testdata/objects.ts";
import type { MigrationPolicy, VirtualMachine, VirtualMachineInstance } from "../types.ts";
import {
  acceptableCompletionTimeSeconds,
  applyMigrationPolicy,
  clusterMigrationConfiguration,
  DEFAULT_MIGRATION_CONFIGURATION,
  matchMigrationPolicy,
  migrationDataSizeGiga,
  resolveMigrationConfiguration,
} from "./migration-config.ts";
import { isLegalMigrationPhaseTransition, isLegalVmiPhaseTransition, isMigrationFinal } from "./phases.ts";
import { PRINTABLE_STATUS_PRECEDENCE, printableStatus } from "./printable-status.ts";
import { nextStartFailure, startBackoffRemainingSeconds, startBackoffSeconds } from "./start-backoff.ts";
import { planVmRun } from "./vm-run-plan.ts";

const NOW = new Date("2026-01-01T00:00:00Z");
const vmWith = (patch: Partial<VirtualMachine["spec"]> = {}, status?: VirtualMachine["status"]): VirtualMachine => {
  const v = newVm();
  v.spec = { ...v.spec, ...patch };
  if (status) v.status = status;
  return v;
};
const vmiWith = (
  status: VirtualMachineInstance["status"],
  meta: VirtualMachineInstance["metadata"] = {},
): VirtualMachineInstance => {
  const v = newVmi("testvm");
  v.metadata = { ...v.metadata, uid: "vmi-1", ...meta };
  v.status = status;
  return v;
};
const cond = (type: string, status: string, reason?: string) => ({ type, status, ...(reason ? { reason } : {}) });

describe("printableStatus(): precedence, first match wins", () => {
  it("has KubeVirt's order", () => {
    expect(PRINTABLE_STATUS_PRECEDENCE).toEqual([
      "Terminating",
      "Stopping",
      "Migrating",
      "Paused",
      "Running",
      "ErrorPvcNotFound",
      "DataVolumeError",
      "ErrorUnschedulable",
      "Provisioning",
      "WaitingForVolumeBinding",
      "ErrImagePull",
      "ImagePullBackOff",
      "Starting",
      "CrashLoopBackOff",
      "Stopped",
      "WaitingForReceiver",
    ]);
  });

  const migrating = { startTimestamp: "2025-12-31T23:59:00Z" };
  it.each<[string, Parameters<typeof printableStatus>[0], string]>([
    [
      "deleted VM beats everything",
      {
        vm: { ...vmWith(), metadata: { name: "v", deletionTimestamp: "2025-01-01T00:00:00Z" } },
        vmi: vmiWith({ phase: "Running" }),
      },
      "Terminating",
    ],
    [
      "deleting VMI beats migrating",
      {
        vm: vmWith(),
        vmi: vmiWith({ phase: "Running", migrationState: migrating }, { deletionTimestamp: "2025-01-01T00:00:00Z" }),
      },
      "Stopping",
    ],
    ["stop expected", { vm: vmWith(), vmi: vmiWith({ phase: "Running" }), stopExpected: true }, "Stopping"],
    [
      "migrating beats paused",
      {
        vm: vmWith(),
        vmi: vmiWith({ phase: "Running", migrationState: migrating, conditions: [cond("Paused", "True")] }),
        now: NOW,
      },
      "Migrating",
    ],
    [
      "finished migration is Running again",
      {
        vm: vmWith(),
        vmi: vmiWith({ phase: "Running", migrationState: { ...migrating, endTimestamp: "2025-12-31T23:59:30Z" } }),
        now: NOW,
      },
      "Running",
    ],
    ["paused", { vm: vmWith(), vmi: vmiWith({ phase: "Running", conditions: [cond("Paused", "True")] }) }, "Paused"],
    ["running", { vm: vmWith(), vmi: vmiWith({ phase: "Running" }) }, "Running"],
    [
      "PVC not found",
      {
        vm: vmWith(),
        vmi: vmiWith({ phase: "Pending", conditions: [cond("Synchronized", "False", "FailedPvcNotFound")] }),
      },
      "ErrorPvcNotFound",
    ],
    [
      "unschedulable beats starting",
      {
        vm: vmWith(),
        vmi: vmiWith({ phase: "Scheduling", conditions: [cond("PodScheduled", "False", "Unschedulable")] }),
      },
      "ErrorUnschedulable",
    ],
    [
      "image pull error",
      {
        vm: vmWith(),
        vmi: vmiWith({ phase: "Scheduling", conditions: [cond("Synchronized", "False", "ErrImagePull")] }),
      },
      "ErrImagePull",
    ],
    [
      "image pull backoff",
      {
        vm: vmWith(),
        vmi: vmiWith({ phase: "Scheduling", conditions: [cond("Synchronized", "False", "ImagePullBackOff")] }),
      },
      "ImagePullBackOff",
    ],
    ["scheduled VMI is starting", { vm: vmWith(), vmi: vmiWith({ phase: "Scheduled" }) }, "Starting"],
    ["no VMI but creation expected", { vm: vmWith(), startExpected: true }, "Starting"],
    [
      "failed early with start failures",
      { vm: vmWith({}, { startFailure: { consecutiveFailCount: 1 } }), vmi: vmiWith({ phase: "Failed" }) },
      "CrashLoopBackOff",
    ],
    [
      "no VMI after start failures",
      { vm: vmWith({}, { startFailure: { consecutiveFailCount: 1, retryAfterTimestamp: "2026-01-01T00:01:00Z" } }) },
      "CrashLoopBackOff",
    ],
    [
      "Manual never crash-loops",
      {
        vm: vmWith({ runStrategy: "Manual" }, { startFailure: { consecutiveFailCount: 1 } }),
        vmi: vmiWith({ phase: "Failed" }),
      },
      "Stopped",
    ],
    ["no VMI", { vm: vmWith({ runStrategy: "Halted" }) }, "Stopped"],
    ["final VMI", { vm: vmWith(), vmi: vmiWith({ phase: "Succeeded" }) }, "Stopped"],
    ["a VMI in Unknown phase", { vm: vmWith(), vmi: vmiWith({ phase: "Unknown" }) }, "Unknown"],
  ])("%s -> %s", (_n, input, want) => {
    expect(printableStatus(input)).toBe(want);
  });
});

describe("crash-loop backoff", () => {
  it.each([
    [1, 0, 10],
    [1, 5, 15],
    [2, 0, 40],
    [3, 0, 90],
    [5, 0, 250],
    [6, 0, 300],
    [0, 0, 10],
  ])("failCount %i with random %i waits %i s", (count, rnd, want) => {
    expect(startBackoffSeconds(count, 300, () => rnd)).toBe(want);
  });

  it("the random part is drawn from [0, delay/2]", () => {
    const seen: number[] = [];
    startBackoffSeconds(2, 300, (n) => {
      seen.push(n);
      return n - 1;
    });
    expect(seen).toEqual([21]);
  });

  it("counts a VMI that ended without running once, and schedules the retry", () => {
    const vm = vmWith();
    const failed = vmiWith({ phase: "Failed", phaseTransitionTimestamps: [{ phase: "Pending" }, { phase: "Failed" }] });
    const first = nextStartFailure(vm, failed, NOW, () => 0);
    expect(first).toEqual({
      consecutiveFailCount: 1,
      lastFailedVMIUID: "vmi-1",
      retryAfterTimestamp: "2026-01-01T00:00:10Z",
    });
    const counted = vmWith({}, { startFailure: first });
    expect(nextStartFailure(counted, failed, NOW, () => 0)).toBe(first);
    expect(startBackoffRemainingSeconds(counted, NOW)).toBe(10);
    const second = nextStartFailure(counted, vmiWith({ phase: "Failed" }, { uid: "vmi-2" }), NOW, () => 0);
    expect(second?.consecutiveFailCount).toBe(2);
    expect(second?.retryAfterTimestamp).toBe("2026-01-01T00:00:40Z");
  });

  it("a VMI that reached Running, or a non-restarting strategy, clears the record", () => {
    const counted = vmWith({}, { startFailure: { consecutiveFailCount: 3 } });
    expect(
      nextStartFailure(counted, vmiWith({ phase: "Failed", phaseTransitionTimestamps: [{ phase: "Running" }] }), NOW),
    ).toBeUndefined();
    expect(
      nextStartFailure(
        vmWith({ runStrategy: "Manual" }, { startFailure: { consecutiveFailCount: 3 } }),
        undefined,
        NOW,
      ),
    ).toBeUndefined();
  });
});

describe("planVmRun(): the VM controller per run strategy", () => {
  const stopFor = (uid: string) => ({ stateChangeRequests: [{ action: "Stop" as const, uid }] });
  it.each<[string, VirtualMachine, VirtualMachineInstance | undefined, unknown]>([
    ["Always, no VMI: create", vmWith(), undefined, { action: "createVmi" }],
    [
      "Always, in backoff: wait",
      vmWith({}, { startFailure: { consecutiveFailCount: 1, retryAfterTimestamp: "2026-01-01T00:00:30Z" } }),
      undefined,
      { action: "waitBackoff", seconds: 30 },
    ],
    ["Always, running: nothing", vmWith(), vmiWith({ phase: "Running" }), { action: "none" }],
    [
      "Always, final: delete (then recreate)",
      vmWith(),
      vmiWith({ phase: "Succeeded" }),
      { action: "deleteVmi", thenRequestStart: false },
    ],
    [
      "Always, stop request for this VMI: delete",
      vmWith({}, stopFor("vmi-1")),
      vmiWith({ phase: "Running" }),
      { action: "deleteVmi", thenRequestStart: false },
    ],
    [
      "Always, stop request for another VMI: nothing",
      vmWith({}, stopFor("old")),
      vmiWith({ phase: "Running" }),
      { action: "none" },
    ],
    [
      "Always, final but already deleting: wait",
      vmWith(),
      vmiWith({ phase: "Failed" }, { deletionTimestamp: "2026-01-01T00:00:00Z" }),
      { action: "none" },
    ],
    [
      "RerunOnFailure, failed: delete and request a start",
      vmWith({ runStrategy: "RerunOnFailure" }),
      vmiWith({ phase: "Failed" }),
      { action: "deleteVmi", thenRequestStart: true },
    ],
    [
      "RerunOnFailure, succeeded: delete, no restart",
      vmWith({ runStrategy: "RerunOnFailure" }),
      vmiWith({ phase: "Succeeded" }),
      { action: "deleteVmi", thenRequestStart: false },
    ],
    [
      "RerunOnFailure, no VMI, strategy just set: create",
      vmWith({ runStrategy: "RerunOnFailure" }, { runStrategy: "Always" }),
      undefined,
      { action: "createVmi" },
    ],
    [
      "RerunOnFailure, no VMI, settled: nothing",
      vmWith({ runStrategy: "RerunOnFailure" }, { runStrategy: "RerunOnFailure" }),
      undefined,
      { action: "none" },
    ],
    [
      "RerunOnFailure, no VMI, start request: create",
      vmWith(
        { runStrategy: "RerunOnFailure" },
        { runStrategy: "RerunOnFailure", stateChangeRequests: [{ action: "Start" }] },
      ),
      undefined,
      { action: "createVmi" },
    ],
    ["Manual, no VMI: nothing", vmWith({ runStrategy: "Manual" }), undefined, { action: "none" }],
    [
      "Manual, start request: create",
      vmWith({ runStrategy: "Manual" }, { stateChangeRequests: [{ action: "Start" }] }),
      undefined,
      { action: "createVmi" },
    ],
    [
      "Manual, final VMI: nothing (never restarts)",
      vmWith({ runStrategy: "Manual" }),
      vmiWith({ phase: "Failed" }),
      { action: "none" },
    ],
    [
      "Manual, stop request: delete",
      vmWith({ runStrategy: "Manual" }, stopFor("vmi-1")),
      vmiWith({ phase: "Running" }),
      { action: "deleteVmi", thenRequestStart: false },
    ],
    [
      "Halted, VMI: delete",
      vmWith({ runStrategy: "Halted" }),
      vmiWith({ phase: "Running" }),
      { action: "deleteVmi", thenRequestStart: false },
    ],
    [
      "Halted, start request (paused start): switch to Always",
      vmWith({ runStrategy: "Halted" }, { stateChangeRequests: [{ action: "Start", data: { paused: "true" } }] }),
      undefined,
      { action: "setRunStrategyAlways" },
    ],
    ["Once, no VMI: create", vmWith({ runStrategy: "Once" }), undefined, { action: "createVmi" }],
    ["Once, final VMI: nothing", vmWith({ runStrategy: "Once" }), vmiWith({ phase: "Failed" }), { action: "none" }],
    [
      "VM being deleted: delete its VMI, whatever the strategy",
      { ...vmWith({ runStrategy: "Manual" }), metadata: { name: "v", deletionTimestamp: "2026-01-01T00:00:00Z" } },
      vmiWith({ phase: "Running" }),
      { action: "deleteVmi", thenRequestStart: false },
    ],
    [
      "VM being deleted with --cascade=orphan: leave the VMI",
      { ...vmWith(), metadata: { name: "v", deletionTimestamp: "2026-01-01T00:00:00Z", finalizers: ["orphan"] } },
      vmiWith({ phase: "Running" }),
      { action: "none" },
    ],
    [
      "VM being deleted, VMI already deleting: wait",
      { ...vmWith(), metadata: { name: "v", deletionTimestamp: "2026-01-01T00:00:00Z" } },
      vmiWith({ phase: "Running" }, { deletionTimestamp: "2026-01-01T00:00:00Z" }),
      { action: "none" },
    ],
    [
      "VM being deleted, no VMI: never creates one",
      { ...vmWith(), metadata: { name: "v", deletionTimestamp: "2026-01-01T00:00:00Z" } },
      undefined,
      { action: "none" },
    ],
    [
      "running and runStrategy: invalid",
      vmWith({ running: true }),
      undefined,
      { action: "invalid", message: "running and runstrategy are mutually exclusive" },
    ],
  ])("%s", (_n, vm, vmi, want) => {
    expect(planVmRun(vm, vmi, NOW)).toEqual(want);
  });
});

describe("phase transitions", () => {
  it.each([
    ["", "Pending", true],
    ["Pending", "Scheduling", true],
    ["Scheduling", "Scheduled", true],
    ["Scheduled", "Running", true],
    ["Running", "Succeeded", true],
    ["Running", "Failed", true],
    ["Pending", "Failed", true],
    ["Running", "Running", true],
    ["Pending", "Running", false],
    ["Scheduling", "Running", false],
    ["Succeeded", "Running", false],
    ["Failed", "Pending", false],
    ["Running", "Pending", false],
    ["Running", "Bogus", false],
  ])("VMI %j -> %j legal: %s", (from, to, legal) => {
    expect(isLegalVmiPhaseTransition(from, to)).toBe(legal);
  });

  it.each([
    ["", "Pending", true],
    ["Pending", "Scheduling", true],
    ["Scheduling", "Scheduled", true],
    ["Scheduled", "PreparingTarget", true],
    ["PreparingTarget", "TargetReady", true],
    ["TargetReady", "Running", true],
    ["Running", "Succeeded", true],
    ["Scheduling", "Failed", true],
    ["Pending", "Running", false],
    ["Scheduled", "TargetReady", false],
    ["Succeeded", "Failed", false],
    ["Failed", "Running", false],
  ])("VMIM %j -> %j legal: %s", (from, to, legal) => {
    expect(isLegalMigrationPhaseTransition(from, to)).toBe(legal);
  });

  it("final migration phases", () => {
    expect([
      isMigrationFinal("Succeeded"),
      isMigrationFinal("Failed"),
      isMigrationFinal("Running"),
      isMigrationFinal(undefined),
    ]).toEqual([true, true, false, false]);
  });
});

describe("migration configuration and MigrationPolicy matching", () => {
  it("KubeVirt's defaults", () => {
    expect(clusterMigrationConfiguration()).toEqual({
      parallelMigrationsPerCluster: 5,
      parallelOutboundMigrationsPerNode: 2,
      bandwidthPerMigration: "0Mi",
      completionTimeoutPerGiB: 150,
      progressTimeout: 150,
      unsafeMigrationOverride: false,
      allowAutoConverge: false,
      allowPostCopy: false,
      allowWorkloadDisruption: false,
      maxDowntimeMs: 900,
      disableTLS: false,
      nodeDrainTaintKey: "kubevirt.io/drain",
      utilityVolumesTimeout: 150,
    });
    expect(clusterMigrationConfiguration({ allowPostCopy: true }).allowWorkloadDisruption).toBe(true);
    expect(
      clusterMigrationConfiguration({ allowPostCopy: true, allowWorkloadDisruption: false }).allowWorkloadDisruption,
    ).toBe(false);
  });

  const policy = (
    name: string,
    vmiSel?: Record<string, string>,
    nsSel?: Record<string, string>,
    spec: Partial<MigrationPolicy["spec"]> = {},
  ): MigrationPolicy => ({
    metadata: { name },
    spec: {
      selectors: {
        ...(vmiSel ? { virtualMachineInstanceSelector: vmiSel } : {}),
        ...(nsSel ? { namespaceSelector: nsSel } : {}),
      },
      ...spec,
    },
  });
  const vmiLabels = { tier: "db", team: "a" };
  const nsLabels = { env: "prod" };

  it.each<[string, MigrationPolicy[], string | undefined]>([
    ["no policies", [], undefined],
    ["a selector label missing on the VMI does not match", [policy("p", { tier: "web" })], undefined],
    ["a namespace label missing does not match", [policy("p", undefined, { env: "dev" })], undefined],
    ["more matching labels win", [policy("one", { tier: "db" }), policy("two", { tier: "db", team: "a" })], "two"],
    [
      "VMI and namespace labels add up",
      [
        policy("vmi2", { tier: "db", team: "a" }),
        policy("vmi1ns2", { tier: "db" }, { env: "prod" }),
        policy("x", {}, {}),
      ],
      "vmi2",
    ],
    ["ties go to more VMI labels", [policy("ns", undefined, { env: "prod" }), policy("vmi", { team: "a" })], "vmi"],
    ["then to the smallest name", [policy("b", { tier: "db" }), policy("a", { team: "a" })], "a"],
    ["an empty selector matches everything", [policy("catch-all", {})], "catch-all"],
  ])("%s", (_n, policies, want) => {
    expect(matchMigrationPolicy(policies, vmiLabels, nsLabels)?.metadata?.name).toBe(want);
  });

  it("as KubeVirt, a VMI without labels skips both selectors", () => {
    expect(
      matchMigrationPolicy([policy("p", { tier: "db" }, { env: "dev" })], undefined, nsLabels)?.metadata?.name,
    ).toBe("p");
  });

  it("the policy's set fields override; allowPostCopy implies allowWorkloadDisruption unless set", () => {
    const base = clusterMigrationConfiguration();
    const p = policy("fast", { tier: "db" }, undefined, {
      allowPostCopy: true,
      bandwidthPerMigration: "1Gi",
      maxDowntimeMs: 300,
    });
    expect(applyMigrationPolicy(base, p)).toEqual({
      ...DEFAULT_MIGRATION_CONFIGURATION,
      allowPostCopy: true,
      allowWorkloadDisruption: true,
      bandwidthPerMigration: "1Gi",
      maxDowntimeMs: 300,
    });
    const q = policy("q", {}, undefined, { allowPostCopy: true, allowWorkloadDisruption: false });
    expect(applyMigrationPolicy(base, q).allowWorkloadDisruption).toBe(false);
    expect(resolveMigrationConfiguration(base, [p], vmiLabels, nsLabels).policyName).toBe("fast");
    expect(resolveMigrationConfiguration(base, [], vmiLabels, nsLabels)).toEqual({ configuration: base });
  });
});

describe("migration completion timeout", () => {
  const withMemory = (guest?: string, request?: string): VirtualMachineInstance => {
    const v = newVmi();
    v.spec.domain.resources = request ? { requests: { memory: request } } : {};
    if (guest) v.spec.domain.memory = { guest };
    return v;
  };
  it.each<[string | undefined, string | undefined, bigint, number]>([
    [undefined, "64M", 1n, 150],
    [undefined, "1G", 1n, 150],
    [undefined, "1Gi", 2n, 300],
    ["8Gi", "1Gi", 9n, 1350],
    [undefined, undefined, 0n, 0],
  ])("guest %s, request %s: %s G of data, %s s", (guest, request, size, seconds) => {
    const v = withMemory(guest, request);
    expect(migrationDataSizeGiga(v)).toBe(size);
    expect(acceptableCompletionTimeSeconds(v, DEFAULT_MIGRATION_CONFIGURATION)).toBe(seconds);
  });

  it("block-migrated disk bytes add to the data", () => {
    expect(migrationDataSizeGiga(withMemory(undefined, "1G"), 1n)).toBe(2n);
  });
});
