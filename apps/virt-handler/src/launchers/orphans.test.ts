import type { VirtualMachineInstance } from "@kvt/api";
import type { DomainInfo } from "@kvt/launcher-rpc";
import { describe, expect, it } from "vitest";
import type { LauncherView } from "./launcher-registry.ts";
import { isStaleTarget, orphansOf } from "./orphans.ts";

function view(uid: string, state: DomainInfo["state"], gone = false): LauncherView {
  return {
    socketPath: `/s/${uid}`,
    client: undefined as never,
    gone,
    info: { protocolVersion: "v1", vmi: { namespace: "d", name: uid, uid }, pod: {}, pid: 1, state },
  };
}

describe("orphansOf", () => {
  it("picks live launchers whose VMI is gone, and nothing else", () => {
    const views = [
      view("a", "Running"),
      view("b", "Running"),
      view("c", "Running", true),
      view("d", "Shutdown"),
      view("e", "NoDomain"),
    ];
    const vmiOf = (uid: string): VirtualMachineInstance | undefined =>
      uid === "a" ? ({ metadata: { uid } } as VirtualMachineInstance) : undefined;
    expect(orphansOf(views, vmiOf, "node02").map((v) => v.info.vmi.uid)).toEqual(["b", "e"]);
  });
});

describe("isStaleTarget", () => {
  const waiting = (migrationUid: string): LauncherView => ({
    ...view("v", "IncomingMigration"),
    info: { ...view("v", "IncomingMigration").info, migration: { migrationUid, role: "target", phase: "Ready" } },
  });
  const vmi = (ms?: Record<string, unknown>): VirtualMachineInstance =>
    ({ metadata: { uid: "v" }, status: { nodeName: "node01", migrationState: ms } }) as VirtualMachineInstance;
  const open = { migrationUid: "m2", sourceNode: "node01", targetNode: "node02" };

  it.each<[string, LauncherView, VirtualMachineInstance, boolean]>([
    ["the open migration's target: kept", waiting("m2"), vmi(open), false],
    ["prepared for an earlier migration: stale", waiting("m1"), vmi(open), true],
    ["prepared for an earlier one, no migration now: stale", waiting("m1"), vmi(), true],
    // The current migration's launcher is left to the target plan: `completed` or `failed` may reach the cache
    // before the launcher's own report that the guest arrived (CI saw this reaper kill a guest that just moved).
    ["the current migration completed: kept", waiting("m2"), vmi({ ...open, completed: true }), false],
    [
      "the current migration failed: kept (the target plan kills it)",
      waiting("m2"),
      vmi({ ...open, failed: true }),
      false,
    ],
    [
      "on the VMI's own node: kept",
      waiting("m1"),
      { ...vmi(open), status: { ...vmi(open).status, nodeName: "node02" } },
      false,
    ],
    ["a running guest is never a stale target", view("v", "Running"), vmi(), false],
    ["a fresh launcher (no domain yet) is not one", view("v", "NoDomain"), vmi(), false],
  ])("%s", (_name, launcher, v, stale) => {
    expect(isStaleTarget(launcher, v, "node02")).toBe(stale);
  });
});
