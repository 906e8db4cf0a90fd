import { describe, expect, it } from "vitest";
import { checkClusterNetwork, clusterTag, forwardGuardRuleset, nodeNames, planClusterNetwork } from "./node-network.ts";

describe("planClusterNetwork", () => {
  it("gives the bridge, each node's namespace and address, and the pod CIDR range, named with the tag", () => {
    const net = planClusterNetwork("/data/cluster", 2, []);
    const tag = clusterTag("/data/cluster");
    const x = net.hostIp.split(".")[1];
    expect(net).toEqual({
      tag,
      bridge: `kvtk-${tag}`,
      hostIp: `10.${x}.255.1`,
      nodeSubnet: `10.${x}.255.0/24`,
      clusterCidr: `10.${x}.0.0/17`,
      nodes: [
        { name: "node01", netns: `kvtk-${tag}-1`, hostVeth: `kvtk-${tag}-1`, ip: `10.${x}.255.11` },
        { name: "node02", netns: `kvtk-${tag}-2`, hostVeth: `kvtk-${tag}-2`, ip: `10.${x}.255.12` },
      ],
    });
    expect(Number(x)).toBeGreaterThanOrEqual(192);
    expect(Number(x)).toBeLessThan(254);
  });

  it("skips every /16 the host already routes, and fails when none is left", () => {
    const first = planClusterNetwork("/data/cluster", 1, []);
    const taken = `10.${first.hostIp.split(".")[1]}.3.0/24`;
    const second = planClusterNetwork("/data/cluster", 1, [taken]);
    expect(second.hostIp).not.toBe(first.hostIp);
    expect(() => planClusterNetwork("/data/cluster", 1, ["10.0.0.0/8"])).toThrow(/no free \/16/);
  });

  it("keeps interface names within Linux's 15 bytes up to the most nodes", () => {
    const net = planClusterNetwork("/data/cluster", 200, []);
    expect(Math.max(...net.nodes.map((n) => n.hostVeth.length))).toBeLessThanOrEqual(15);
    expect(net.nodes.at(-1)?.ip.endsWith(".210")).toBe(true);
  });

  it.each([-1, 1.5, 201, Number.NaN])("refuses %s nodes", (count) => {
    expect(() => nodeNames(count)).toThrow(RangeError);
  });

  it("reads back only its own directory's network", () => {
    const net = planClusterNetwork("/data/cluster", 2, []);
    expect(checkClusterNetwork(JSON.parse(JSON.stringify(net)), "/data/cluster")).toEqual(net);
    expect(() => checkClusterNetwork(net, "/data/other")).toThrow(/not this cluster directory's/);
    const bad = { ...net, nodes: [{ ...net.nodes[0], netns: "eth0" }] };
    expect(() => checkClusterNetwork(bad, "/data/cluster")).toThrow(/node .* is wrong/);
  });
});

describe("forwardGuardRuleset", () => {
  it("drops what would be forwarded between the bridge and any other interface, both ways", () => {
    const rules = forwardGuardRuleset("kvtk-abc123");
    expect(rules).toContain("table inet kvtk-abc123 {");
    expect(rules).toContain("type filter hook forward priority filter; policy accept;");
    expect(rules).toContain('iifname "kvtk-abc123" oifname != "kvtk-abc123" drop');
    expect(rules).toContain('oifname "kvtk-abc123" iifname != "kvtk-abc123" drop');
  });
});
