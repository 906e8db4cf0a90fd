import { describe, expect, it } from "vitest";
import { holdsNetAdmin, launcherNetwork, processHoldsNetAdmin } from "./launcher-network.ts";

/** A /proc/<pid>/status excerpt with that effective set. */
const status = (capEff: string): string => `Name:\tnode\nUid:\t107\t107\t107\t107\nCapInh:\t0\nCapEff:\t${capEff}\n`;

describe("holdsNetAdmin()", () => {
  it.each([
    ["root's full set", "000001ffffffffff", true],
    ["CAP_NET_ADMIN alone (bit 12)", "0000000000001000", true],
    ["containerd's default set for a root container (no NET_ADMIN)", "00000000a80425fb", false],
    ["a non-root container's (user 107: empty)", "0000000000000000", false],
    ["every bit but 12", "ffffffffffffefff", false],
  ])("%s", (_what, capEff, expected) => {
    expect(holdsNetAdmin(status(capEff))).toBe(expected);
  });

  it("holds nothing when the status has no readable CapEff line", () => {
    expect(holdsNetAdmin("Name:\tnode\n")).toBe(false);
    expect(holdsNetAdmin("CapEff:\tnot-hex\n")).toBe(false);
  });

  it("reads this process's own set", () => {
    // Whichever user runs the tests: root holds it, any other user (no file capabilities on node) does not.
    expect(processHoldsNetAdmin()).toBe(process.getuid?.() === 0);
  });
});

describe("launcherNetwork()", () => {
  it("without POD_IP (a host's network): migrations on 127.0.0.1, nothing wired", () => {
    expect(launcherNetwork(undefined, true)).toEqual({ inPodNetwork: false });
    expect(launcherNetwork("", true)).toEqual({ inPodNetwork: false });
  });

  it("in a pod with CAP_NET_ADMIN (the process-kubelet's root launcher): listens on the pod IP and wires", () => {
    expect(launcherNetwork("10.200.1.7", true)).toEqual({
      migrationHost: "10.200.1.7",
      migrationPort: 49152,
      inPodNetwork: true,
      podNetworkWiring: "self",
      podIp: "10.200.1.7",
    });
  });

  it("in a pod without it (a real node's user 107): listens on the pod IP, serves what virt-handler plumbed", () => {
    expect(launcherNetwork("10.200.1.7", false)).toEqual({
      migrationHost: "10.200.1.7",
      migrationPort: 49152,
      inPodNetwork: true,
      podNetworkWiring: "node",
      podIp: "10.200.1.7",
    });
  });
});
