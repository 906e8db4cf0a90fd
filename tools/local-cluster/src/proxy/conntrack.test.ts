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
  it("clears the flows of an endpoint that moved (a migrated VM's old launcher pod)", () => {
    expect(staleFlows([route(["10.70.1.5"])], [route(["10.70.2.9"])])).toEqual([
      { protocol: "tcp", clusterIP: "10.134.0.20", port: 80, endpoint: "10.70.1.5" },
    ]);
  });

  it("clears nothing while the endpoint still serves, nor for a new one", () => {
    expect(staleFlows([route(["10.70.1.5"])], [route(["10.70.1.5", "10.70.2.9"])])).toEqual([]);
    // Terminating but serving: out of the backends while others are ready, still draining its connections.
    expect(
      staleFlows([route(["10.70.1.5", "10.70.2.9"])], [route(["10.70.1.5", "10.70.2.9"], { backends: [] })]),
    ).toEqual([]);
    expect(staleFlows([], [route(["10.70.2.9"])])).toEqual([]);
  });

  it("clears per Service port and protocol, and nothing for a port that is gone", () => {
    const dns = { id: "default/web/udp/dns", protocol: "udp" as const, port: 53 };
    const before = [route(["10.70.1.5", "10.70.1.6"]), route(["10.70.1.5"], dns), route(["10.70.1.7"], { port: 81 })];
    const after = [route(["10.70.1.6"]), route([], dns)];
    expect(staleFlows(before, after)).toEqual([
      { protocol: "tcp", clusterIP: "10.134.0.20", port: 80, endpoint: "10.70.1.5" },
      { protocol: "udp", clusterIP: "10.134.0.20", port: 53, endpoint: "10.70.1.5" },
    ]);
  });

  it("tells a ClusterIP's ports apart from another Service's same port", () => {
    const other = { id: "default/other/tcp/80", clusterIP: "10.134.0.21" };
    expect(
      staleFlows([route(["10.70.1.5"]), route(["10.70.1.5"], other)], [route(["10.70.1.5"]), route([], other)]),
    ).toEqual([{ protocol: "tcp", clusterIP: "10.134.0.21", port: 80, endpoint: "10.70.1.5" }]);
  });
});

describe("staleFlowEntries", () => {
  it("matches the Service's address and port before DNAT and the endpoint as the reply's source", () => {
    const flows = { protocol: "tcp", clusterIP: "10.134.0.20", port: 80, endpoint: "10.70.1.5" } as const;
    expect(conntrackDeleteArgs(staleFlowEntries(flows))).toEqual([
      "-D",
      "-p",
      "tcp",
      "--orig-dst",
      "10.134.0.20",
      "--orig-port-dst",
      "80",
      "--reply-src",
      "10.70.1.5",
    ]);
  });
});
