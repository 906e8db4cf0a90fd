import type { VirtualMachineInstance } from "@kvt/api";
import type { DomainInfo, DomainState, MigrationInfo } from "@kvt/launcher-rpc";
import { describe, expect, it } from "vitest";
import { migrationOptionsOf } from "../migration/migration-options.ts";
import { sourceMigrationStatus, targetMigrationStatus } from "../migration/migration-status.ts";
import { planVmi } from "./vmi-plan.ts";
import { computeVmiStatus, LAUNCHER_EXITED, type LauncherFacts, nextPhase, SYNC_FAILED } from "./vmi-status.ts";

const NODE = "node01";
const NOW = "2026-11-22T05:00:00Z";

function vmi(
  phase: string,
  extra: Partial<NonNullable<VirtualMachineInstance["status"]>> = {},
): VirtualMachineInstance {
  return Object.freeze({
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachineInstance",
    metadata: { name: "vm1", namespace: "default", uid: "vmi-1" },
    spec: { domain: { devices: {} }, terminationGracePeriodSeconds: 7 },
    status: { phase, nodeName: NODE, ...extra },
  } as VirtualMachineInstance);
}

function info(state: DomainState, extra: Partial<DomainInfo> = {}): DomainInfo {
  return {
    protocolVersion: "v1",
    vmi: { namespace: "default", name: "vm1", uid: "vmi-1" },
    pod: { name: "virt-launcher-vm1-a", uid: "pod-a" },
    pid: 1,
    state,
    ...extra,
  };
}

const facts = (i?: DomainInfo, more: Partial<LauncherFacts> = {}): LauncherFacts => ({
  registrySynced: true,
  ...(i ? { info: i } : {}),
  ...more,
});

describe("nextPhase", () => {
  it.each([
    ["Scheduled", facts(info("NoDomain")), "Scheduled", undefined],
    ["Scheduled", facts(info("Running")), "Running", undefined],
    ["Scheduled", facts(info("Paused")), "Running", undefined],
    ["Running", facts(info("Shutdown")), "Succeeded", undefined],
    ["Running", facts(info("Crashed", { reason: "vcpu exit: triple fault" })), "Failed", "vcpu exit: triple fault"],
    ["Running", facts(info("Running"), { gone: true }), "Failed", LAUNCHER_EXITED],
    ["Running", facts(undefined), "Failed", LAUNCHER_EXITED],
    ["Running", { registrySynced: false }, "Running", undefined],
    ["Scheduled", facts(undefined), "Scheduled", undefined],
    ["Scheduled", facts(info("NoDomain"), { syncFailure: "no image" }), "Failed", SYNC_FAILED],
    ["Running", facts(info("Migrated")), "Running", undefined],
    ["Succeeded", facts(info("Crashed")), "Succeeded", undefined],
    ["Failed", facts(info("Running")), "Failed", undefined],
  ])("%s + launcher %j -> %s (%s)", (current, f, phase, reason) => {
    expect(nextPhase(current, f)).toEqual(reason ? { phase, reason } : { phase });
  });
});

describe("computeVmiStatus", () => {
  it("Scheduled -> Running: timestamps the phase, sets Ready and LiveMigratable, records the launcher pod", () => {
    const s = computeVmiStatus(vmi("Scheduled"), facts(info("Running")), { nodeName: NODE, now: NOW });
    expect(s.phase).toBe("Running");
    expect(s.phaseTransitionTimestamps).toEqual([{ phase: "Running", phaseTransitionTimestamp: NOW }]);
    expect(s.conditions?.map((c) => [c.type, c.status])).toEqual([
      ["Ready", "True"],
      ["LiveMigratable", "True"],
    ]);
    expect(s.activePods).toEqual({ "pod-a": NODE });
  });

  it("a paused domain adds Paused=True (PausedByUser); unpausing removes it without moving Ready's transition time", () => {
    const running = computeVmiStatus(vmi("Scheduled"), facts(info("Running")), { nodeName: NODE, now: NOW });
    const paused = computeVmiStatus(vmi("Running", running), facts(info("Paused")), {
      nodeName: NODE,
      now: "2026-11-22T05:00:09Z",
    });
    expect(paused.conditions?.find((c) => c.type === "Paused")).toMatchObject({
      status: "True",
      reason: "PausedByUser",
    });
    expect(paused.conditions?.find((c) => c.type === "Ready")?.lastTransitionTime).toBe(NOW);
    const resumed = computeVmiStatus(vmi("Running", paused), facts(info("Running")), { nodeName: NODE, now: NOW });
    expect(resumed.conditions?.find((c) => c.type === "Paused")).toBeUndefined();
  });

  it("LiveMigratable is False with the launcher's reason, and an emulated guest gets SoftwareEmulation", () => {
    const i = info("Running", { notMigratableReason: "host device", emulated: true, backendReason: "no VT-x" });
    const s = computeVmiStatus(vmi("Scheduled"), facts(i), { nodeName: NODE, now: NOW });
    expect(s.conditions?.find((c) => c.type === "LiveMigratable")).toMatchObject({
      status: "False",
      message: "host device",
    });
    expect(s.conditions?.find((c) => c.type === "SoftwareEmulation")).toMatchObject({
      status: "True",
      message: "no VT-x",
    });
  });

  it("LiveMigratable is False with DisksNotLiveMigratable when a claim is ReadWriteOnce, True once it is RWX", () => {
    const withClaim = (modes: string[]): VirtualMachineInstance => ({
      ...vmi("Scheduled", {
        volumeStatus: [{ name: "data", target: "vda", persistentVolumeClaimInfo: { accessModes: modes } }],
      }),
      spec: {
        domain: { devices: { disks: [{ name: "data" }] } },
        volumes: [{ name: "data", persistentVolumeClaim: { claimName: "pvc1" } }],
      },
    });
    const rwo = computeVmiStatus(withClaim(["ReadWriteOnce"]), facts(info("Running")), { nodeName: NODE, now: NOW });
    expect(rwo.conditions?.find((c) => c.type === "LiveMigratable")).toMatchObject({
      status: "False",
      reason: "DisksNotLiveMigratable",
      message:
        "cannot migrate VMI: PVC pvc1 is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)",
    });
    const rwx = computeVmiStatus(withClaim(["ReadWriteMany"]), facts(info("Running")), { nodeName: NODE, now: NOW });
    expect(rwx.conditions?.find((c) => c.type === "LiveMigratable")?.status).toBe("True");
  });

  it("LiveMigratable is False with InterfaceNotLiveMigratable for a bridge on the pod network, unless annotated", () => {
    const bridged = (annotations?: Record<string, string>): VirtualMachineInstance => ({
      ...vmi("Scheduled"),
      metadata: { name: "vm1", namespace: "default", uid: "vmi-1", ...(annotations ? { annotations } : {}) },
      spec: {
        domain: { devices: { interfaces: [{ name: "default", bridge: {} }] } },
        networks: [{ name: "default", pod: {} }],
      },
    });
    const ctx = { nodeName: NODE, now: NOW };
    expect(
      computeVmiStatus(bridged(), facts(info("Running")), ctx).conditions?.find((c) => c.type === "LiveMigratable"),
    ).toMatchObject({
      status: "False",
      reason: "InterfaceNotLiveMigratable",
      message: "cannot migrate VMI which does not use masquerade or a migratable plugin to connect to the pod network",
    });
    const allowed = bridged({ "kubevirt.io/allow-pod-bridge-network-live-migration": "" });
    expect(
      computeVmiStatus(allowed, facts(info("Running")), ctx).conditions?.find((c) => c.type === "LiveMigratable")
        ?.status,
    ).toBe("True");
  });

  it("reports the launcher's wired interfaces in status.interfaces as KubeVirt fills them", () => {
    const wired = {
      name: "default",
      mac: "02:aa:bb:cc:dd:ee",
      ipAddress: "10.64.1.7",
      podInterfaceName: "eth0",
      infoSource: "domain",
      queueCount: 1,
    };
    const s = computeVmiStatus(vmi("Scheduled"), facts(info("Running", { interfaces: [wired] })), {
      nodeName: NODE,
      now: NOW,
    });
    expect(s.interfaces).toEqual([{ ...wired, ipAddresses: ["10.64.1.7"] }]);
    const none = computeVmiStatus(vmi("Scheduled"), facts(info("Running")), { nodeName: NODE, now: NOW });
    expect(none.interfaces).toBeUndefined();
  });

  it("leaves VMIs of other nodes and not yet Scheduled ones alone", () => {
    const other = vmi("Running", { nodeName: "node02" });
    expect(computeVmiStatus(other, facts(info("Crashed")), { nodeName: NODE, now: NOW })).toEqual(other.status);
    const pending = vmi("Scheduling");
    expect(computeVmiStatus(pending, facts(info("Running")), { nodeName: NODE, now: NOW })).toEqual(pending.status);
  });

  it("a refused spec fails the VMI with Synchronized=False carrying the launcher's message", () => {
    const f = facts(info("NoDomain"), { syncFailure: "image local/x is not in the store" });
    const s = computeVmiStatus(vmi("Scheduled"), f, { nodeName: NODE, now: NOW });
    expect(s).toMatchObject({ phase: "Failed", reason: SYNC_FAILED });
    expect(s.conditions?.find((c) => c.type === "Synchronized")).toMatchObject({
      status: "False",
      message: "image local/x is not in the store",
    });
  });

  it("a failed guest gets the reason and Ready=False GuestNotRunning", () => {
    const s = computeVmiStatus(vmi("Running"), facts(info("Crashed", { reason: "Killed" })), {
      nodeName: NODE,
      now: NOW,
    });
    expect(s).toMatchObject({ phase: "Failed", reason: "Killed" });
    expect(s.conditions?.find((c) => c.type === "Ready")).toMatchObject({ status: "False", reason: "GuestNotRunning" });
  });
});

const ms = (extra: Record<string, unknown> = {}) => ({
  migrationUid: "mig-1",
  sourceNode: NODE,
  targetNode: "node02",
  targetPod: "virt-launcher-vm1-b",
  ...extra,
});
const sourceMig = (phase: MigrationInfo["phase"], more: Partial<MigrationInfo> = {}): MigrationInfo => ({
  migrationUid: "mig-1",
  role: "source",
  phase,
  startTime: "2026-11-22T04:59:00Z",
  ...more,
});

describe("planVmi", () => {
  const opts = migrationOptionsOf(undefined);
  it.each<[string, VirtualMachineInstance, LauncherFacts, DomainInfo | undefined, string, unknown[]]>([
    [
      "boots a Scheduled VMI",
      vmi("Scheduled"),
      facts(info("NoDomain")),
      undefined,
      NODE,
      [{ kind: "sync", on: "source" }],
    ],
    [
      "does not retry a refused spec",
      vmi("Scheduled"),
      facts(info("NoDomain"), { syncFailure: "x" }),
      undefined,
      NODE,
      [],
    ],
    ["waits for a launcher", vmi("Scheduled"), facts(undefined), undefined, NODE, []],
    ["does nothing for a running guest", vmi("Running"), facts(info("Running")), undefined, NODE, []],
    [
      "shuts a deleted VMI down with its grace period",
      { ...vmi("Running"), metadata: { name: "vm1", namespace: "default", deletionTimestamp: NOW } },
      facts(info("Paused")),
      undefined,
      NODE,
      [{ kind: "shutdown", on: "source", gracePeriodSeconds: 7 }],
    ],
    [
      "migrates once the target is published",
      vmi("Running", {
        migrationState: ms({ targetNodeAddress: "127.0.0.1", targetDirectMigrationNodePorts: { "40001": 0 } }),
      }),
      facts(info("Running")),
      undefined,
      NODE,
      [
        {
          kind: "migrate",
          on: "source",
          migrationUid: "mig-1",
          target: { host: "127.0.0.1", port: 40001 },
          options: opts,
        },
      ],
    ],
    [
      "waits for the target to be published",
      vmi("Running", { migrationState: ms() }),
      facts(info("Running")),
      undefined,
      NODE,
      [],
    ],
    [
      "does not migrate twice",
      vmi("Running", { migrationState: ms({ targetNodeAddress: "h", targetDirectMigrationNodePorts: { "1": 0 } }) }),
      facts(info("Running", { migration: sourceMig("Running") })),
      undefined,
      NODE,
      [],
    ],
    [
      "cancels a running migration on abortRequested",
      vmi("Running", { migrationState: ms({ abortRequested: true }) }),
      facts(info("Running", { migration: sourceMig("Running") })),
      undefined,
      NODE,
      [{ kind: "cancel-migration", on: "source", migrationUid: "mig-1" }],
    ],
    [
      "prepares this node's target launcher",
      vmi("Running", { migrationState: ms() }),
      facts(undefined),
      info("NoDomain", { pod: { name: "virt-launcher-vm1-b", uid: "pod-b" } }),
      "node02",
      [{ kind: "prepare-target", on: "target", migrationUid: "mig-1" }],
    ],
    [
      // Killing it then would race the source's cancel: a stream cut before the cancel fails the abort.
      "leaves a waiting target alone on abortRequested until the source reports the migration over",
      vmi("Running", { migrationState: ms({ abortRequested: true }) }),
      facts(undefined),
      info("IncomingMigration"),
      "node02",
      [],
    ],
    [
      "does not prepare a target for a migration already asked to abort",
      vmi("Running", { migrationState: ms({ abortRequested: true }) }),
      facts(undefined),
      info("NoDomain", { pod: { name: "virt-launcher-vm1-b", uid: "pod-b" } }),
      "node02",
      [],
    ],
    [
      "kills a waiting target once the source reports the canceled migration failed",
      vmi("Running", { migrationState: ms({ abortRequested: true, abortStatus: "Succeeded", failed: true }) }),
      facts(undefined),
      info("IncomingMigration"),
      "node02",
      [{ kind: "kill", on: "target" }],
    ],
    [
      "kills a waiting target when the migration failed",
      vmi("Running", { migrationState: ms({ failed: true }) }),
      facts(undefined),
      info("IncomingMigration"),
      "node02",
      [{ kind: "kill", on: "target" }],
    ],
  ])("%s", (_name, v, f, target, node, expected) => {
    expect(planVmi(v, f, target, node)).toEqual(expected);
  });
});

describe("migrationState halves", () => {
  it("source success: completed, end time, nodeName moves to the target, the source pod leaves activePods", () => {
    const status = {
      phase: "Running" as const,
      nodeName: NODE,
      evacuationNodeName: NODE,
      activePods: { "pod-a": NODE },
      migrationState: ms(),
    };
    const i = info("Migrated", { migration: sourceMig("Succeeded", { endTime: NOW }) });
    const s = sourceMigrationStatus(status, i, NOW);
    expect(s.nodeName).toBe("node02");
    expect(s).not.toHaveProperty("evacuationNodeName");
    expect(s.activePods).toEqual({});
    expect(s.migrationState).toMatchObject({
      completed: true,
      endTimestamp: NOW,
      startTimestamp: "2026-11-22T04:59:00Z",
      mode: "PreCopy",
    });
  });

  it("source failure after a cancel: failed with the reason, abortStatus Succeeded, guest stays", () => {
    const status = { phase: "Running" as const, nodeName: NODE, migrationState: ms({ abortRequested: true }) };
    const i = info("Running", {
      migration: sourceMig("Failed", {
        result: { ok: false, failureReason: "canceled", totalSeconds: 1, bytesSent: 0, iterations: 1 },
      }),
    });
    const s = sourceMigrationStatus(status, i, NOW);
    expect(s.nodeName).toBe(NODE);
    expect(s.migrationState).toMatchObject({ failed: true, failureReason: "canceled", abortStatus: "Succeeded" });
  });

  it("target: publishes the address and port, then detects the domain and adds its pod", () => {
    const status = { phase: "Running" as const, nodeName: NODE, migrationState: ms() };
    const ready = info("IncomingMigration", {
      pod: { name: "virt-launcher-vm1-b", uid: "pod-b" },
      migration: {
        migrationUid: "mig-1",
        role: "target",
        phase: "Ready",
        targetAddress: { host: "127.0.0.1", port: 40001 },
      },
    });
    const s1 = targetMigrationStatus(status, ready, { nodeName: "node02", now: NOW });
    expect(s1.migrationState).toMatchObject({
      targetNodeAddress: "127.0.0.1",
      targetDirectMigrationNodePorts: { "40001": 0 },
    });
    const running = {
      ...ready,
      state: "Running" as const,
      migration: { ...ready.migration!, phase: "Succeeded" as const },
    };
    const s2 = targetMigrationStatus(s1, running, { nodeName: "node02", now: NOW });
    expect(s2.migrationState).toMatchObject({ targetNodeDomainDetected: true, targetNodeDomainReadyTimestamp: NOW });
    expect(s2.activePods).toEqual({ "pod-b": "node02" });
  });

  it("migration options follow migrationConfiguration with KubeVirt's defaults", () => {
    expect(migrationOptionsOf({ bandwidthPerMigration: "64Mi", allowAutoConverge: true, maxDowntimeMs: 300 })).toEqual({
      bandwidthBytesPerSec: 64 * 2 ** 20,
      maxDowntimeMs: 300,
      allowAutoConverge: true,
      allowPostCopy: false,
      completionTimeoutPerGiB: 150,
      progressTimeoutSeconds: 150,
    });
    expect(migrationOptionsOf({ disableTLS: true })).toMatchObject({ disableTLS: true });
    expect(migrationOptionsOf({ disableTLS: false })).not.toHaveProperty("disableTLS");
  });
});
