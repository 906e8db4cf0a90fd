import type { VirtualMachineInstance } from "@kvt/api";
import { describe, expect, it } from "vitest";
import {
  BRIDGED_POD_INTERFACE,
  bridgeCommands,
  bridgeLease,
  enslaveCommands,
  fakeBridgeIp,
  isBridgePlan,
  PodInterfaceError,
  type PodInterfaceState,
  parsePodInterface,
  planBridge,
} from "./bridge-plan.ts";
import { planMasquerade } from "./masquerade-plan.ts";
import { planPodNetwork } from "./pod-network.ts";

const vmi = (
  iface: Record<string, unknown>,
  extra: { interfaces?: Record<string, unknown>[]; status?: Record<string, unknown> } = {},
): VirtualMachineInstance =>
  ({
    metadata: { name: "vm1", namespace: "default", uid: "u-1" },
    spec: {
      domain: { devices: { interfaces: [...(extra.interfaces ?? []), { name: "default", ...iface }] } },
      networks: [{ name: "default", pod: {} }, ...(extra.interfaces ?? []).map((i) => ({ name: i.name, multus: {} }))],
      subdomain: "sub",
    },
    ...(extra.status ? { status: extra.status } : {}),
  }) as VirtualMachineInstance;

/** `ip -j addr show dev eth0` and `ip -j -4 route show` in a local-cluster pod (iproute2 6.1). */
const ADDR_JSON = JSON.stringify([
  {
    ifindex: 2,
    link_index: 2,
    ifname: "eth0",
    flags: ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"],
    mtu: 1450,
    address: "c6:63:56:a0:9b:13",
    addr_info: [
      { family: "inet", local: "10.99.1.5", prefixlen: 16, scope: "global", label: "eth0" },
      { family: "inet6", local: "fe80::c463:56ff:fea0:9b13", prefixlen: 64, scope: "link" },
    ],
  },
]);
const ROUTE_JSON = JSON.stringify([
  { dst: "10.98.0.0/16", gateway: "10.99.0.1", dev: "eth0", flags: [] },
  { dst: "10.99.0.0/16", dev: "eth0", protocol: "kernel", scope: "link", prefsrc: "10.99.1.5", flags: [] },
  { dst: "192.0.2.0/24", gateway: "10.99.0.9", dev: "other0", flags: [] },
]);

describe("planBridge()", () => {
  it("plans the pod interface's bridge binding; the MAC is the spec's, else the status's, else the pod's", () => {
    expect(planBridge(vmi({ bridge: {} }))).toEqual({
      binding: "bridge",
      name: "default",
      model: "virtio",
      index: 0,
      hostname: "vm1",
      subdomain: "sub",
    });
    expect(planBridge(vmi({ bridge: {}, macAddress: "DE-AD-00-00-BE-AF" }))?.mac).toBe("de:ad:00:00:be:af");
    const status = { interfaces: [{ name: "default", mac: "02:00:00:00:00:07" }] };
    expect(planBridge(vmi({ bridge: {} }, { status }))?.mac).toBe("02:00:00:00:00:07");
  });

  it("counts the interface's position for the DHCP server's 169.254.75.1x and carries dhcpOptions", () => {
    const plan = planBridge(
      vmi(
        { bridge: {}, dhcpOptions: { bootFileName: "pxe.0", ntpServers: ["10.0.0.5"] } },
        { interfaces: [{ name: "second", bridge: {} }] },
      ),
    );
    expect(plan).toMatchObject({ index: 1, dhcpOptions: { bootFileName: "pxe.0", ntpServers: ["10.0.0.5"] } });
    expect(fakeBridgeIp(plan!.index)).toBe("169.254.75.11");
  });

  it("leaves masquerade to planMasquerade(); planPodNetwork() picks whichever the pod interface uses", () => {
    expect(planBridge(vmi({ masquerade: {} }))).toBeUndefined();
    expect(planMasquerade(vmi({ bridge: {} }))).toBeUndefined();
    expect(isBridgePlan(planPodNetwork(vmi({ bridge: {} })))).toBe(true);
    expect(isBridgePlan(planPodNetwork(vmi({ masquerade: {} })))).toBe(false);
    expect(planPodNetwork(vmi({ sriov: {} }))).toBeUndefined();
    expect(() => planBridge(vmi({ bridge: {}, model: "virtio-foo" }))).toThrow('unsupported model "virtio-foo"');
  });
});

describe("parsePodInterface()", () => {
  it("reads the MAC, MTU, global addresses and the routes through eth0 from iproute2's JSON", () => {
    expect(parsePodInterface(ADDR_JSON, ROUTE_JSON)).toEqual({
      mac: "c6:63:56:a0:9b:13",
      mtu: 1450,
      addresses: [{ family: "inet", ip: "10.99.1.5", prefixLength: 16 }],
      routes: [{ destination: "10.98.0.0/16", gateway: "10.99.0.1" }, { destination: "10.99.0.0/16" }],
    });
    const withDefault = JSON.stringify([{ dst: "default", gateway: "10.99.0.1", dev: "eth0" }]);
    expect(parsePodInterface(ADDR_JSON, withDefault).routes).toEqual([
      { destination: "0.0.0.0/0", gateway: "10.99.0.1" },
    ]);
  });

  it.each([
    ["no JSON", "ip -j", "[]", "printed no JSON"],
    ["no interface", "[]", "[]", "has no MAC address"],
    ["a bad MAC", JSON.stringify([{ address: "zz" }]), "[]", "has no MAC address"],
    ["routes not a list", ADDR_JSON, "{}", "printed no list"],
  ])("refuses %s with a PodInterfaceError", (_name, addr, routes, message) => {
    expect(() => parsePodInterface(addr, routes)).toThrow(PodInterfaceError);
    expect(() => parsePodInterface(addr, routes)).toThrow(message);
  });
});

describe("bridgeLease()", () => {
  const pod = parsePodInterface(ADDR_JSON, ROUTE_JSON);
  const plan = planBridge(vmi({ bridge: {} }))!;

  it("hands the pod's address, gateway and non-local routes to the pod's MAC, served from 169.254.75.10", () => {
    expect(bridgeLease(plan, pod)).toEqual({
      mac: "c6:63:56:a0:9b:13",
      ip: "10.99.1.5",
      prefixLength: 16,
      gateway: "10.99.0.1",
      routes: [{ destination: "10.98.0.0/16", gateway: "10.99.0.1" }],
      serverIp: "169.254.75.10",
      mtu: 1450,
    });
  });

  it("prefers the default route's gateway and keeps the default route; the spec's MAC wins", () => {
    const withDefault: PodInterfaceState = {
      ...pod,
      routes: [
        { destination: "10.98.0.0/16", gateway: "10.99.0.7" },
        { destination: "0.0.0.0/0", gateway: "10.99.0.1" },
        { destination: "10.99.0.0/16" },
      ],
    };
    const lease = bridgeLease({ ...plan, mac: "02:00:00:00:00:01" }, withDefault)!;
    expect(lease.gateway).toBe("10.99.0.1");
    expect(lease.mac).toBe("02:00:00:00:00:01");
    expect(lease.routes).toEqual([
      { destination: "10.98.0.0/16", gateway: "10.99.0.7" },
      { destination: "0.0.0.0/0", gateway: "10.99.0.1" },
    ]);
  });

  it("gives no lease to a pod without IPv4 (KubeVirt's IPAM disabled)", () => {
    expect(bridgeLease(plan, { ...pod, addresses: [] })).toBeUndefined();
  });
});

describe("the wiring commands", () => {
  const pod = parsePodInterface(ADDR_JSON, ROUTE_JSON);
  const plan = planBridge(vmi({ bridge: {} }))!;

  it("build k6t-eth0 with the fake address only when the pod has IPv4", () => {
    expect(bridgeCommands(plan, pod)).toEqual([
      ["ip", "link", "add", "k6t-eth0", "type", "bridge"],
      ["ip", "addr", "add", "169.254.75.10/32", "dev", "k6t-eth0"],
      ["ip", "link", "set", "dev", "k6t-eth0", "up"],
    ]);
    expect(bridgeCommands(plan, { ...pod, addresses: [] })).toHaveLength(2);
  });

  it("move eth0 into the bridge without addresses, add the tap, keep the pod's address on a dummy eth0", () => {
    const commands = enslaveCommands(pod, "36:bb:5a:69:bd:dd").map((c) => c.join(" "));
    expect(commands).toEqual([
      "ip link set dev eth0 down",
      `ip link set dev eth0 name ${BRIDGED_POD_INTERFACE}`,
      "ip link set dev eth0-nic address 36:bb:5a:69:bd:dd",
      "ip link set dev eth0-nic master k6t-eth0",
      "ip addr flush dev eth0-nic",
      "ip link set dev eth0-nic up",
      "bridge link set dev eth0-nic learning off",
      "ip tuntap add dev tap0 mode tap",
      "ip link set dev tap0 mtu 1450 master k6t-eth0 up",
      "ip link add eth0 type dummy",
      "ip link set dev eth0 address c6:63:56:a0:9b:13 mtu 1450",
      "ip addr add 10.99.1.5/16 dev eth0",
    ]);
    // The placeholder is never set up: the pod's address stays inert there.
    expect(commands.filter((c) => c.startsWith("ip link set dev eth0 ") && c.endsWith(" up"))).toEqual([]);
  });
});
