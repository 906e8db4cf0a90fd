import type { VirtualMachineInstance } from "@kvt/api";
import type { DomainInfo } from "@kvt/launcher-rpc";
import { describe, expect, it } from "vitest";
import { chooseLauncher } from "./domain-choice.ts";
import type { LauncherView } from "./launcher-registry.ts";

function view(pod: string, state: DomainInfo["state"], startedAt?: string, gone = false): LauncherView {
  return {
    socketPath: `/s/${pod}`,
    client: undefined as never,
    gone,
    info: {
      protocolVersion: "v1",
      vmi: { namespace: "d", name: "vm", uid: "u" },
      pod: { uid: pod },
      pid: 1,
      state,
      ...(startedAt ? { startedAt } : {}),
    },
  };
}

const vmi = (activePods: Record<string, string> = {}): VirtualMachineInstance => ({
  metadata: { name: "vm", namespace: "d", uid: "u" },
  spec: { domain: { devices: {} } },
  status: { activePods },
});

describe("chooseLauncher", () => {
  it.each([
    { case: "none", views: [], chosen: undefined, duplicates: [] },
    {
      case: "only gone ones: the first (its final state)",
      views: [view("a", "Shutdown", undefined, true)],
      chosen: "a",
      duplicates: [],
    },
    {
      case: "a duplicate with no guest listed first: the one with the guest (never sync a second domain)",
      views: [view("dup", "NoDomain"), view("a", "Running", "2026-01-01T00:00:00Z")],
      chosen: "a",
      duplicates: [],
    },
    {
      case: "two guests: the longest-running is kept, the other killed",
      views: [view("new", "Running", "2026-01-01T00:01:00Z"), view("old", "Paused", "2026-01-01T00:00:00Z")],
      chosen: "old",
      duplicates: ["new"],
    },
    {
      case: "two guests: the active pod's wins over age",
      active: { new: "n1" },
      views: [view("new", "Running", "2026-01-01T00:01:00Z"), view("old", "Running", "2026-01-01T00:00:00Z")],
      chosen: "new",
      duplicates: ["old"],
    },
    {
      case: "no guest yet: the active pod's launcher, not a stray one",
      active: { b: "n1" },
      views: [view("a", "NoDomain"), view("b", "NoDomain")],
      chosen: "b",
      duplicates: [],
    },
    {
      case: "a migrated source and the guest's target launcher: the target",
      views: [view("src", "Migrated"), view("tgt", "IncomingMigration")],
      chosen: "tgt",
      duplicates: [],
    },
  ])("$case", ({ views, active, chosen, duplicates }) => {
    const choice = chooseLauncher(views, vmi(active as Record<string, string> | undefined));
    expect(choice.view?.info.pod.uid).toBe(chosen);
    expect(choice.duplicates.map((d) => d.info.pod.uid)).toEqual(duplicates);
  });
});
