import type { DomainInfo } from "@kvt/launcher-rpc";
import { describe, expect, it } from "vitest";
import type { LauncherView } from "./launcher-registry.ts";
import { orphansOf } from "./orphans.ts";

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
    const exists = (uid: string): boolean => uid === "a";
    expect(orphansOf(views, exists).map((v) => v.info.vmi.uid)).toEqual(["b", "e"]);
  });
});
