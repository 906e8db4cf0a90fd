import type { VirtualMachineInstance } from "@kvt/api";
import { describe, expect, it } from "vitest";
import {
  generatedMac,
  MasqueradeError,
  masqueradeAddresses,
  masqueradeRuleset,
  nicNeedsQemu,
  parseResolvConf,
  planMasquerade,
} from "./masquerade-plan.ts";

const vmi = (iface: Record<string, unknown>, pod: Record<string, unknown> = {}): VirtualMachineInstance => ({
  metadata: { name: "vm1", namespace: "default", uid: "u-1" },
  spec: {
    domain: { devices: { interfaces: [{ name: "default", ...iface }] } },
    networks: [{ name: "default", pod }],
  },
});

describe("planMasquerade()", () => {
  it("plans KubeVirt's defaults: 10.0.2.1 gateway, 10.0.2.2 guest, a stable generated MAC", () => {
    const plan = planMasquerade(vmi({ masquerade: {} }))!;
    expect(plan).toEqual({
      name: "default",
      model: "virtio",
      mac: generatedMac("u-1", "default"),
      gateway: "10.0.2.1",
      guestIp: "10.0.2.2",
      prefixLength: 24,
      hostname: "vm1",
    });
    expect(plan.mac).toMatch(/^02(:[0-9a-f]{2}){5}$/);
    expect(planMasquerade(vmi({ masquerade: {} }))!.mac).toBe(plan.mac);
  });

  it("takes macAddress, ports and vmNetworkCIDR from the spec; other bindings get no plan", () => {
    const plan = planMasquerade(
      vmi(
        { masquerade: {}, macAddress: "DE-AD-00-00-BE-AF", ports: [{ port: 80 }, { port: 53, protocol: "UDP" }] },
        { vmNetworkCIDR: "10.11.12.0/28" },
      ),
    )!;
    expect(plan).toMatchObject({
      mac: "de:ad:00:00:be:af",
      gateway: "10.11.12.1",
      guestIp: "10.11.12.2",
      prefixLength: 28,
      ports: [
        { protocol: "tcp", port: 80 },
        { protocol: "udp", port: 53 },
      ],
    });
    expect(planMasquerade(vmi({ bridge: {} }))).toBeUndefined();
    expect(() => planMasquerade(vmi({ masquerade: {}, model: "virtio-foo" }))).toThrow(
      'interface default has an unsupported model "virtio-foo"',
    );
    expect(() => masqueradeAddresses("10.0.0.0/31")).toThrow(MasqueradeError);
  });
});

describe("masqueradeRuleset()", () => {
  it("is KubeVirt's IPv4 masquerade table, migration ports kept from the guest", () => {
    expect(
      masqueradeRuleset(planMasquerade(vmi({ masquerade: {} }))!)
        .trim()
        .split("\n"),
    ).toEqual([
      "add table ip nat",
      "add chain ip nat prerouting { type nat hook prerouting priority -100; }",
      "add chain ip nat input { type nat hook input priority 100; }",
      "add chain ip nat output { type nat hook output priority -100; }",
      "add chain ip nat postrouting { type nat hook postrouting priority 100; }",
      "add chain ip nat KUBEVIRT_PREINBOUND",
      "add chain ip nat KUBEVIRT_POSTINBOUND",
      "add rule ip nat postrouting ip saddr 10.0.2.2 counter masquerade",
      "add rule ip nat prerouting iifname eth0 counter jump KUBEVIRT_PREINBOUND",
      "add rule ip nat postrouting oifname k6t-eth0 counter jump KUBEVIRT_POSTINBOUND",
      "add rule ip nat KUBEVIRT_PREINBOUND tcp dport { 49152, 49153 } counter return",
      "add rule ip nat KUBEVIRT_PREINBOUND counter dnat to 10.0.2.2",
      "add rule ip nat KUBEVIRT_POSTINBOUND ip saddr { 127.0.0.1 } counter snat to 10.0.2.1",
      "add rule ip nat output ip daddr { 127.0.0.1 } counter dnat to 10.0.2.2",
    ]);
  });

  it("forwards only the declared ports when there are some", () => {
    const rules = masqueradeRuleset(planMasquerade(vmi({ masquerade: {}, ports: [{ port: 80 }] }))!);
    expect(rules).toContain("add rule ip nat KUBEVIRT_PREINBOUND tcp dport { 80 } counter dnat to 10.0.2.2");
    expect(rules).toContain(
      "add rule ip nat KUBEVIRT_POSTINBOUND tcp dport 80 ip saddr { 127.0.0.1 } counter snat to 10.0.2.1",
    );
    expect(rules).toContain("add rule ip nat output ip daddr { 127.0.0.1 } tcp dport 80 counter dnat to 10.0.2.2");
    expect(rules).not.toContain("KUBEVIRT_PREINBOUND counter dnat");
  });
});

it("parseResolvConf() reads name servers and the search list", () => {
  expect(parseResolvConf("search a.svc b.local\nnameserver 10.96.0.10\nnameserver ::1\noptions ndots:5\n")).toEqual({
    dns: ["10.96.0.10"],
    search: ["a.svc", "b.local"],
  });
});

describe("nicNeedsQemu()", () => {
  it("sends a non-virtio model to QEMU (KubeVirt's models), virtio stays on our VMM", () => {
    expect(nicNeedsQemu(planMasquerade(vmi({ masquerade: {} })))).toBeUndefined();
    expect(nicNeedsQemu(planMasquerade(vmi({ masquerade: {}, model: "e1000" })))).toBe(
      "interface default (model e1000) needs a device only QEMU provides",
    );
    expect(nicNeedsQemu(undefined)).toBeUndefined();
  });
});
