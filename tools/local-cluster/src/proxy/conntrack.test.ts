/** Which conntrack deletions a change of routes asks for (pure), and the entries of one. */

import { conntrackDeleteArgs } from "@kvt/pod-network";
import { describe, expect, it } from "vitest";
import { staleFlowEntries, staleFlows } from "./conntrack.ts";
import type { ServicePortRoute } from "./nft-ruleset.ts";

const route = (serving: string[], over: Partial<ServicePortRoute> = {}): ServicePortRoute => ({
  id: "default/web/tcp/80",
  clusterIP: "10.134.0.20",
  protocol: "tcp",
  port: 80,
  backends: serving.map((a) => `${a}:8080`),
  serving,
  ...over,
});

describe("staleFlows", () => {
  const udp = { id: "default/web/udp/80", protocol: "udp" as const };

  it("clears the UDP flows of an endpoint that left the Service, as kube-proxy", () => {
    expect(staleFlows([route(["10.70.1.5"], udp)], [route(["10.70.2.9"], udp)])).toEqual([
      { protocol: "udp", clusterIP: "10.134.0.20", port: 80, endpoint: "10.70.1.5" },
    ]);
  });

  it("leaves TCP and SCTP flows, as kube-proxy (a migrated VM's are virt-handler's)", () => {
    expect(staleFlows([route(["10.70.1.5"])], [route(["10.70.2.9"])])).toEqual([]);
    const sctp = { id: "default/web/sctp/80", protocol: "sctp" as const };
    expect(staleFlows([route(["10.70.1.5"], sctp)], [route(["10.70.2.9"], sctp)])).toEqual([]);
  });

  it("clears nothing while the endpoint still serves, nor for a new one", () => {
    expect(staleFlows([route(["10.70.1.5"], udp)], [route(["10.70.1.5", "10.70.2.9"], udp)])).toEqual([]);
    // Terminating but serving: out of the backends while others are ready, still draining its connections.
    expect(
      staleFlows(
        [route(["10.70.1.5", "10.70.2.9"], udp)],
        [route(["10.70.1.5", "10.70.2.9"], { ...udp, backends: [] })],
      ),
    ).toEqual([]);
    expect(staleFlows([], [route(["10.70.2.9"], udp)])).toEqual([]);
  });

  it("clears per Service port, and nothing for a port that is gone", () => {
    const dns = { id: "default/web/udp/dns", port: 53 };
    const before = [
      route(["10.70.1.5", "10.70.1.6"], udp),
      route(["10.70.1.5"], { ...udp, ...dns }),
      route(["10.70.1.7"], { ...udp, port: 81 }),
    ];
    const after = [route(["10.70.1.6"], udp), route([], { ...udp, ...dns })];
    expect(staleFlows(before, after)).toEqual([
      { protocol: "udp", clusterIP: "10.134.0.20", port: 80, endpoint: "10.70.1.5" },
      { protocol: "udp", clusterIP: "10.134.0.20", port: 53, endpoint: "10.70.1.5" },
    ]);
  });

  it("tells a ClusterIP's ports apart from another Service's same port", () => {
    const other = { ...udp, id: "default/other/udp/80", clusterIP: "10.134.0.21" };
    expect(
      staleFlows(
        [route(["10.70.1.5"], udp), route(["10.70.1.5"], other)],
        [route(["10.70.1.5"], udp), route([], other)],
      ),
    ).toEqual([{ protocol: "udp", clusterIP: "10.134.0.21", port: 80, endpoint: "10.70.1.5" }]);
  });
});

describe("staleFlowEntries", () => {
  it("matches the Service's address and port before DNAT and the endpoint as the reply's source", () => {
    const flows = { protocol: "udp", clusterIP: "10.134.0.20", port: 80, endpoint: "10.70.1.5" } as const;
    expect(conntrackDeleteArgs(staleFlowEntries(flows))).toEqual([
      "-D",
      "-p",
      "udp",
      "--orig-dst",
      "10.134.0.20",
      "--orig-port-dst",
      "80",
      "--reply-src",
      "10.70.1.5",
    ]);
  });
});
