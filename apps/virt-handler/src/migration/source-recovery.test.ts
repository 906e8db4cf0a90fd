import type { VirtualMachineInstance, VirtualMachineInstanceStatus } from "@kvt/api";
import type { DomainInfo, DomainState, MigrationInfo } from "@kvt/launcher-rpc";
import { migrationFailureReason } from "@kvt/observability";
import { describe, expect, it } from "vitest";
import { computeVmiStatus, LAUNCHER_EXITED, type LauncherFacts } from "../vmi/vmi-status.ts";
import { targetMigrationStatus } from "./migration-status.ts";
import { failLostMigration, lostReason, sourceLauncherLoss, TARGET_REPORT_TIMEOUT_MS } from "./source-recovery.ts";

const SOURCE = "node01";
const TARGET = "node02";
const NOW = "2026-11-26T03:00:00Z";

const open = {
  migrationUid: "mig-1",
  sourceNode: SOURCE,
  targetNode: TARGET,
  targetNodeAddress: "127.0.0.1",
  targetDirectMigrationNodePorts: { "40001": 0 },
  startTimestamp: "2026-11-26T02:59:58Z",
  mode: "PreCopy" as const,
};

function vmi(migrationState: Record<string, unknown> | null = open, nodeName = SOURCE): VirtualMachineInstance {
  return Object.freeze({
    metadata: { name: "vm1", namespace: "default", uid: "vmi-1" },
    spec: { domain: { devices: {} } },
    status: {
      phase: "Running",
      nodeName,
      activePods: { "pod-a": SOURCE },
      ...(migrationState ? { migrationState } : {}),
    },
  } as VirtualMachineInstance);
}

function info(state: DomainState, migration?: Partial<MigrationInfo>, pod = "pod-a"): DomainInfo {
  return {
    protocolVersion: "v1",
    vmi: { namespace: "default", name: "vm1", uid: "vmi-1" },
    pod: { name: `virt-launcher-vm1-${pod}`, uid: pod },
    pid: 1,
    state,
    ...(migration ? { migration: { migrationUid: "mig-1", role: "source", phase: "Running", ...migration } } : {}),
  };
}

const missing: LauncherFacts = { registrySynced: true };
const gone = (i: DomainInfo): LauncherFacts => ({ registrySynced: true, info: i, gone: true });

describe("sourceLauncherLoss: what a restarted source handler concludes", () => {
  it.each<[string, VirtualMachineInstance, LauncherFacts, number, string]>([
    ["no launcher found after a restart, migration open: waits for the target", vmi(), missing, 0, "await-target"],
    ["still waiting just before the timeout", vmi(), missing, TARGET_REPORT_TIMEOUT_MS - 1, "await-target"],
    [
      "launcher killed while sending: waits too",
      vmi(),
      gone(info("Running", { phase: "Running" })),
      5000,
      "await-target",
    ],
    ["no report from the target within the timeout: lost", vmi(), missing, TARGET_REPORT_TIMEOUT_MS, "lost"],
    [
      "the launcher's own Migrated report: the usual handoff",
      vmi(),
      gone(info("Migrated", { phase: "Succeeded" })),
      0,
      "none",
    ],
    [
      "migration Succeeded in its last report: the usual handoff",
      vmi(),
      gone(info("Running", { phase: "Succeeded" })),
      0,
      "none",
    ],
    ["the guest crashed before: lost here, no wait", vmi(), gone(info("Crashed", { phase: "Running" })), 0, "none"],
    ["the guest shut down: no wait", vmi(), gone(info("Shutdown")), 0, "none"],
    ["killed before it ever sent this migration: no wait", vmi(), gone(info("Running")), 0, "none"],
    [
      "killed while sending another migration: no wait",
      vmi(),
      gone(info("Running", { migrationUid: "mig-0" })),
      0,
      "none",
    ],
    ["the launcher is alive: the usual source half", vmi(), { registrySynced: true, info: info("Running") }, 0, "none"],
    ["the registry has not scanned yet: nothing known", vmi(), { registrySynced: false }, 0, "none"],
    ["no migration open", vmi(null), missing, 0, "none"],
    [
      "the target never published an address: nothing left here",
      vmi({ ...open, targetNodeAddress: undefined }),
      missing,
      0,
      "none",
    ],
    ["the migration already failed", vmi({ ...open, failed: true }), missing, 0, "none"],
    ["the migration already completed", vmi({ ...open, completed: true }), missing, 0, "none"],
    ["the VMI already moved to the target", vmi(open, TARGET), missing, 0, "none"],
  ])("%s", (_name, v, facts, missingForMs, kind) => {
    expect(sourceLauncherLoss(v, facts, SOURCE, missingForMs).kind).toBe(kind);
  });

  it("asks to be woken when the wait runs out, at least a second later", () => {
    expect(sourceLauncherLoss(vmi(), missing, SOURCE, 20_000)).toEqual({ kind: "await-target", retryAfterMs: 40_000 });
    expect(sourceLauncherLoss(vmi(), missing, SOURCE, 59_900)).toEqual({ kind: "await-target", retryAfterMs: 1000 });
  });

  it("while it waits the VMI stays Running; once lost it fails and the migration says why", () => {
    const waiting = computeVmiStatus(vmi(), { ...missing, awaitingTarget: true }, { nodeName: SOURCE, now: NOW });
    expect(waiting.phase).toBe("Running");
    // The old behaviour: without the wait the restarted source handler fails a VMI whose guest moved.
    expect(computeVmiStatus(vmi(), missing, { nodeName: SOURCE, now: NOW })).toMatchObject({
      phase: "Failed",
      reason: LAUNCHER_EXITED,
    });
    const verdict = sourceLauncherLoss(vmi(), missing, SOURCE, TARGET_REPORT_TIMEOUT_MS);
    expect(verdict).toEqual({ kind: "lost", failureReason: lostReason(TARGET_REPORT_TIMEOUT_MS) });
    const failed = failLostMigration(
      computeVmiStatus(vmi(), missing, { nodeName: SOURCE, now: NOW }),
      lostReason(60_000),
      NOW,
    );
    expect(failed.phase).toBe("Failed");
    expect(failed.migrationState).toMatchObject({
      failed: true,
      endTimestamp: NOW,
      failureReason:
        "the source virt-launcher exited during the migration and the domain was not reported on the destination node within 60 seconds",
    });
    expect(failed.migrationState?.completed).toBeUndefined();
    // Counted as the source's failure in the handler's migration-failure metric.
    expect(migrationFailureReason(lostReason(60_000))).toBe("SourceFailed");
  });

  it("a lost migration that had an abort requested says the abort failed", () => {
    const s = failLostMigration({ migrationState: { ...open, abortRequested: true } }, "x", NOW);
    expect(s.migrationState).toMatchObject({ failed: true, abortStatus: "Failed" });
  });
});

describe("targetMigrationStatus: the target's handler takes a completed migration over by itself", () => {
  const arrived = info("Running", { role: "target", phase: "Succeeded", endTime: "2026-11-26T02:59:59Z" }, "pod-b");
  const status = (): VirtualMachineInstanceStatus => structuredClone(vmi().status!);

  it("records completion, moves nodeName here and keeps only its own pod active (no word from the source)", () => {
    const s = targetMigrationStatus({ ...status(), evacuationNodeName: SOURCE }, arrived, {
      nodeName: TARGET,
      now: NOW,
    });
    expect(s.nodeName).toBe(TARGET);
    expect(s).not.toHaveProperty("evacuationNodeName");
    expect(s.phase).toBe("Running");
    expect(s.activePods).toEqual({ "pod-b": TARGET });
    expect(s.migrationState).toMatchObject({
      completed: true,
      endTimestamp: "2026-11-26T02:59:59Z",
      startTimestamp: open.startTimestamp,
      targetNodeDomainDetected: true,
      targetNodeDomainReadyTimestamp: NOW,
      sourceNode: SOURCE,
    });
    expect(s.migrationState?.failed).toBeUndefined();
  });

  it("then the restarted source handler has nothing left to decide: the VMI is not its own any more", () => {
    const s = targetMigrationStatus(status(), arrived, { nodeName: TARGET, now: NOW });
    const after = { ...vmi(), status: s } as VirtualMachineInstance;
    expect(sourceLauncherLoss(after, missing, SOURCE, TARGET_REPORT_TIMEOUT_MS * 2).kind).toBe("none");
    expect(computeVmiStatus(after, missing, { nodeName: SOURCE, now: NOW })).toEqual(s);
  });

  it("a start time the source never wrote is bounded by the target's ready time", () => {
    const ready = { ...arrived, migration: { ...arrived.migration!, startTime: "2026-11-26T02:59:50Z" } };
    const s = targetMigrationStatus({ ...status(), migrationState: { ...open, startTimestamp: undefined } }, ready, {
      nodeName: TARGET,
      now: NOW,
    });
    expect(s.migrationState?.startTimestamp).toBe("2026-11-26T02:59:50Z");
  });

  it("an abort that came too late is recorded as failed, the migration as completed", () => {
    const s = targetMigrationStatus({ ...status(), migrationState: { ...open, abortRequested: true } }, arrived, {
      nodeName: TARGET,
      now: NOW,
    });
    expect(s.migrationState).toMatchObject({ completed: true, abortStatus: "Failed" });
  });

  it.each<[string, DomainInfo, Record<string, unknown>]>([
    ["still receiving", info("IncomingMigration", { role: "target", phase: "Running" }, "pod-b"), open],
    ["the incoming migration failed", info("Crashed", { role: "target", phase: "Failed" }, "pod-b"), open],
    [
      "another migration's launcher",
      info("Running", { role: "target", phase: "Succeeded", migrationUid: "mig-0" }, "pod-b"),
      open,
    ],
    ["the migration was already failed", arrived, { ...open, failed: true }],
  ])("no handoff when %s", (_name, i, ms) => {
    const s = targetMigrationStatus({ ...status(), migrationState: ms }, i, { nodeName: TARGET, now: NOW });
    expect(s.nodeName).toBe(SOURCE);
    expect(s.migrationState?.completed).toBeUndefined();
    expect(
      targetMigrationStatus({ ...status(), migrationState: ms, evacuationNodeName: SOURCE }, i, {
        nodeName: TARGET,
        now: NOW,
      }),
    ).toHaveProperty("evacuationNodeName", SOURCE);
  });
});
