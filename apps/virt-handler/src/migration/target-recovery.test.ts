import type { VirtualMachineInstance } from "@kvt/api";
import type { DomainInfo, DomainState, MigrationInfo } from "@kvt/launcher-rpc";
import { describe, expect, it } from "vitest";
import { planVmi } from "../vmi/vmi-plan.ts";

/** A target handler that restarts finds its launcher prepared: what it does depends on what it published. */
const TARGET = "node02";
const vmi = (ms: Record<string, unknown> = {}): VirtualMachineInstance =>
  Object.freeze({
    metadata: { name: "vm1", namespace: "default", uid: "vmi-1" },
    spec: { domain: { devices: {} } },
    status: {
      phase: "Running",
      nodeName: "node01",
      migrationState: { migrationUid: "mig-1", sourceNode: "node01", targetNode: TARGET, ...ms },
    },
  } as VirtualMachineInstance);

function target(state: DomainState, migration?: Partial<MigrationInfo>): DomainInfo {
  return {
    protocolVersion: "v1",
    vmi: { namespace: "default", name: "vm1", uid: "vmi-1" },
    pod: { uid: "pod-b" },
    pid: 2,
    state,
    ...(migration ? { migration: { migrationUid: "mig-1", role: "target", phase: "Ready", ...migration } } : {}),
  };
}

const prepare = [{ kind: "prepare-target", on: "target", migrationUid: "mig-1" }];

describe("planVmi on a migration target after a handler restart", () => {
  it.each<[string, VirtualMachineInstance, DomainInfo, boolean, unknown[]]>([
    [
      "prepared, secret not published by this process: prepare again",
      vmi(),
      target("IncomingMigration", {}),
      false,
      prepare,
    ],
    ["prepared and published here: nothing", vmi(), target("IncomingMigration", {}), true, []],
    [
      "still preparing (the first call's answer is on its way): nothing",
      vmi(),
      target("IncomingMigration", { phase: "Preparing" }),
      false,
      [],
    ],
    ["another migration's launcher: nothing", vmi(), target("IncomingMigration", { migrationUid: "mig-0" }), false, []],
    ["the guest arrived: nothing", vmi(), target("Running", { phase: "Succeeded" }), false, []],
    [
      "the migration failed: the waiting target is killed",
      vmi({ failed: true }),
      target("IncomingMigration", {}),
      false,
      [{ kind: "kill", on: "target" }],
    ],
    ["a fresh target launcher: prepare", vmi(), target("NoDomain"), true, prepare],
    // While the VMI still names the source, a target that runs the guest is never killed, whatever else it says.
    [
      "failed, yet the guest runs here: not killed",
      vmi({ failed: true }),
      target("Running", { phase: "Succeeded" }),
      true,
      [],
    ],
    [
      "abort requested too late: not killed",
      vmi({ abortRequested: true }),
      target("Running", { phase: "Succeeded" }),
      true,
      [],
    ],
    ["paused guest arrived: not killed", vmi({ failed: true }), target("Paused", { phase: "Succeeded" }), true, []],
  ])("%s", (_name, v, t, secretPublished, expected) => {
    expect(planVmi(v, { registrySynced: true }, t, TARGET, { secretPublished })).toEqual(expected);
  });
});
