/**
 * The service proxy's rules (pure): which Service ports route where (ready endpoints, the terminating fallback,
 * values refused before they reach nft), the script's shape, and, as root, that the kernel accepts it (`nft -c`,
 * which checks a script without committing it).
 */
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import {
  deleteTableScript,
  inCidr,
  type ProxyNetwork,
  renderRuleset,
  type ServiceInfo,
  type SliceInfo,
  serviceRoutes,
} from "./nft-ruleset.ts";

const NET: ProxyNetwork = {
  table: "kvt-abc123",
  bridge: "kvt-abc123",
  clusterCidr: "10.70.0.0/16",
  serviceCidr: "10.134.0.0/16",
};
const svc = (name: string, clusterIP: string, ports = [{ name: "", port: 80, protocol: "TCP" }]): ServiceInfo => ({
  namespace: "default",
  name,
  clusterIP,
  ports,
});
type Ep = SliceInfo["endpoints"][number];
const ep = (address: string, o: Partial<Ep> = {}): Ep => ({
  addresses: [address],
  ready: true,
  serving: true,
  terminating: false,
  ...o,
});
const slice = (serviceName: string, endpoints: Ep[], ports = [{ name: "", port: 8080, protocol: "TCP" }]) => ({
  namespace: "default",
  serviceName,
  ports,
  endpoints,
});

describe("serviceRoutes", () => {
  it("routes each Service port to its ready endpoints' target port", () => {
    const routes = serviceRoutes(
      NET,
      [svc("web", "10.134.0.20")],
      [slice("web", [ep("10.70.1.3"), ep("10.70.2.4"), ep("10.70.1.9", { ready: false, serving: false })])],
    );
    expect(routes).toEqual([
      {
        id: "default/web/tcp/80",
        clusterIP: "10.134.0.20",
        protocol: "tcp",
        port: 80,
        backends: ["10.70.1.3:8080", "10.70.2.4:8080"],
        serving: ["10.70.1.3", "10.70.2.4"],
      },
    ]);
  });

  it("matches slice ports by name and protocol, across several slices", () => {
    const ports = [
      { name: "http", port: 80, protocol: "TCP" },
      { name: "dns", port: 53, protocol: "UDP" },
    ];
    const routes = serviceRoutes(
      NET,
      [svc("multi", "10.134.0.21", ports)],
      [
        slice("multi", [ep("10.70.1.3")], [{ name: "http", port: 8080, protocol: "TCP" }]),
        slice("multi", [ep("10.70.1.4")], [{ name: "dns", port: 5353, protocol: "UDP" }]),
      ],
    );
    expect(routes.map((r) => [r.id, r.backends])).toEqual([
      ["default/multi/tcp/http", ["10.70.1.3:8080"]],
      ["default/multi/udp/dns", ["10.70.1.4:5353"]],
    ]);
  });

  it("falls back to serving terminating endpoints when none is ready", () => {
    const routes = serviceRoutes(
      NET,
      [svc("web", "10.134.0.20")],
      [slice("web", [ep("10.70.1.3", { ready: false, terminating: true })])],
    );
    expect(routes[0]?.backends).toEqual(["10.70.1.3:8080"]);
    expect(routes[0]?.serving).toEqual(["10.70.1.3"]);
  });

  it("keeps a port with no endpoint (it is rejected) and skips headless Services", () => {
    const routes = serviceRoutes(NET, [svc("empty", "10.134.0.22"), svc("headless", "None")], []);
    expect(routes).toEqual([
      { id: "default/empty/tcp/80", clusterIP: "10.134.0.22", protocol: "tcp", port: 80, backends: [], serving: [] },
    ]);
  });

  it.each([
    ["a ClusterIP outside the service range", [svc("x", "10.96.0.1")], [], /outside 10\.134\.0\.0\/16/],
    ["an endpoint off the pod network", [svc("x", "10.134.0.9")], [slice("x", [ep("192.0.2.1")])], /pod network/],
    ["an injected endpoint", [svc("x", "10.134.0.9")], [slice("x", [ep("10.70.1.1; flush ruleset")])], /pod/],
    ["an unknown protocol", [svc("x", "10.134.0.9", [{ name: "", port: 80, protocol: "ICMP" }])], [], /not routable/],
    ["a port out of range", [svc("x", "10.134.0.9", [{ name: "", port: 70000, protocol: "TCP" }])], [], /not routable/],
  ])("leaves out %s and says why", (_what, services, slices, why) => {
    const problems: string[] = [];
    const routes = serviceRoutes(NET, services, slices, (m) => problems.push(m));
    expect(routes.flatMap((r) => r.backends)).toEqual([]);
    expect(problems.join("\n")).toMatch(why);
  });

  it("checks CIDR membership on whole octets", () => {
    expect(inCidr("10.70.255.1", "10.70.0.0/16")).toBe(true);
    expect(inCidr("10.71.0.1", "10.70.0.0/16")).toBe(false);
    expect(inCidr("10.70.0.300", "10.70.0.0/16")).toBe(false);
  });
});

describe("renderRuleset", () => {
  const routes = serviceRoutes(
    NET,
    [svc("web", "10.134.0.20"), svc("one", "10.134.0.23"), svc("empty", "10.134.0.22")],
    [slice("web", [ep("10.70.1.3"), ep("10.70.2.4")]), slice("one", [ep("10.70.1.5")])],
  );
  const script = renderRuleset(NET, routes);

  it("replaces the cluster's table in one transaction", () => {
    expect(script.split("\n").slice(0, 3)).toEqual([
      "table ip kvt-abc123",
      "delete table ip kvt-abc123",
      "table ip kvt-abc123 {",
    ]);
  });

  it("DNATs a ClusterIP port to one of its endpoints, picked at random", () => {
    expect(script).toContain("\t\tip daddr 10.134.0.20 meta l4proto tcp th dport 80 goto svc-default/web/tcp/80\n");
    expect(script).toContain(
      "numgen random mod 2 vmap { 0 : goto ep-default/web/tcp/80/10.70.1.3/8080, 1 : goto ep-default/web/tcp/80/10.70.2.4/8080 }",
    );
    expect(script).toContain(
      "\tchain ep-default/web/tcp/80/10.70.2.4/8080 {\n\t\tmeta l4proto tcp dnat to 10.70.2.4:8080\n",
    );
    expect(script).toContain("\tchain svc-default/one/tcp/80 {\n\t\tgoto ep-default/one/tcp/80/10.70.1.5/8080\n");
  });

  it("rejects ClusterIPs left unDNATed, masquerades onto the bridge and forwards nothing off it", () => {
    expect(script).not.toContain("10.134.0.22");
    expect(script).toContain('\t\toifname "kvt-abc123" ct original ip daddr 10.134.0.0/16 masquerade\n');
    expect(script).toContain('\t\tiifname "kvt-abc123" oifname != "kvt-abc123" drop\n');
    expect(script.match(/ip daddr 10\.134\.0\.0\/16 reject/g)).toHaveLength(2);
    expect(script).toContain('\t\tiifname "kvt-abc123" jump services\n');
  });

  it("drops, rather than resets, a mid-stream segment from the bridge that belongs to no flow", () => {
    expect(script).toContain(
      '\tchain filter-input {\n\t\ttype filter hook input priority filter; policy accept;\n\t\tiifname "kvt-abc123" meta l4proto tcp ct state new tcp flags & (syn | rst) == 0 drop\n\t}\n',
    );
  });

  it("refuses a table or bridge name nft would misread", () => {
    expect(() => renderRuleset({ ...NET, table: "x; flush ruleset" }, [])).toThrow(TypeError);
    expect(() => renderRuleset({ ...NET, bridge: 'br"0' }, [])).toThrow(TypeError);
    expect(() => deleteTableScript("a b")).toThrow(TypeError);
  });

  it.runIf(process.getuid?.() === 0 && spawnSync("nft", ["--version"]).status === 0)(
    "is accepted by the kernel (nft -c checks without committing)",
    () => {
      const check = spawnSync("nft", ["-c", "-f", "-"], { input: script, encoding: "utf8" });
      expect(check.stderr).toBe("");
      expect(check.status).toBe(0);
    },
  );
});
