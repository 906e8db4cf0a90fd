/**
 * KubeVirt's `masquerade` binding of the pod network, decided from the VMI (pure). Inside the launcher pod:
 *
 *   guest eth0 (MAC) ── tap0 ── k6t-eth0 bridge 10.0.2.1/24 ── (routing + NAT in the pod) ── eth0 (pod IP)
 *        10.0.2.2 by DHCP from the launcher (gateway 10.0.2.1, DNS and search from the pod's resolv.conf)
 *
 * nftables `table ip nat` as KubeVirt's masquerade (pkg/network/setup/netpod/masquerade): the guest's traffic is
 * masqueraded to the pod IP; inbound traffic on eth0 goes to the guest (every port, or only the interface's
 * `ports`); the pod's own 127.0.0.1 reaches those ports too. The launcher's migration ports (KubeVirt's legacy
 * 49152, 49153) are never forwarded: a migration target listens on them at the pod IP.
 */
import { podInterface, type VirtualMachineInstance } from "@kvt/api";
import type { DhcpExtraOptions } from "./dhcp.ts";
import { dhcpExtraOf } from "./guest-lease.ts";

/** The migration ports a launcher listens on at its pod IP (KubeVirt's LiveMigrationPorts). */
export const MIGRATION_PORTS = [49152, 49153] as const;

/** Names of the in-pod devices (KubeVirt's). */
export const POD_INTERFACE = "eth0";
export const BRIDGE = "k6t-eth0";
export const TAP = "tap0";

/** How the launcher wires the guest to the pod network. */
export interface MasqueradePlan {
  /** The interface's name in the VMI (`default`). */
  readonly name: string;
  readonly mac: string;
  /** The NIC model (`interfaces[].model`, default virtio); only QEMU provides the others. */
  readonly model: NicModel;
  readonly gateway: string;
  readonly guestIp: string;
  readonly prefixLength: number;
  /** Only these are forwarded to the guest when given (`interfaces[].ports`). */
  readonly ports?: readonly { readonly protocol: "tcp" | "udp"; readonly port: number }[];
  readonly hostname: string;
  /** The VMI's `spec.subdomain`: its DNS domain leads the lease's search list. */
  readonly subdomain?: string;
  /** The interface's `dhcpOptions`. */
  readonly dhcpOptions?: DhcpExtraOptions;
}

/** KubeVirt's interface models; QEMU has a device of each name (virtio is virtio-net-pci). */
export const NIC_MODELS = ["virtio", "e1000", "e1000e", "igb", "ne2k_pci", "pcnet", "rtl8139"] as const;
export type NicModel = (typeof NIC_MODELS)[number];

/** Why the NIC needs QEMU (a model our VMM does not have), or undefined. */
export function nicNeedsQemu(plan: Pick<MasqueradePlan, "name" | "model"> | undefined): string | undefined {
  if (!plan || plan.model === "virtio") return undefined;
  return `interface ${plan.name} (model ${plan.model}) needs a device only QEMU provides`;
}

/** A VMI the masquerade binding cannot wire; `message` names the field. */
export class MasqueradeError extends Error {
  override name = "MasqueradeError";
}

/**
 * The masquerade plan of the VMI's pod interface, or undefined when it has none or another binding (those get no
 * NIC from this launcher yet). Throws a MasqueradeError for a vmNetworkCIDR that is not an IPv4 /30 or larger.
 */
export function planMasquerade(vmi: VirtualMachineInstance): MasqueradePlan | undefined {
  const iface = podInterface(vmi);
  if (!iface?.masquerade) return undefined;
  const net = vmi.spec?.networks?.find((n) => n.name === iface.name);
  const [gateway, guestIp, prefixLength] = masqueradeAddresses(net?.pod?.vmNetworkCIDR ?? "10.0.2.0/24");
  const ports = iface.ports?.map((p) => ({
    protocol: (p.protocol ?? "TCP").toLowerCase() === "udp" ? ("udp" as const) : ("tcp" as const),
    port: p.port,
  }));
  const model = nicModelOf(iface);
  const dhcpOptions = dhcpExtraOf(iface);
  return {
    name: iface.name,
    model,
    mac: normalizeMac(iface.macAddress) ?? generatedMac(vmi.metadata?.uid ?? vmi.metadata?.name ?? "", iface.name),
    gateway,
    guestIp,
    prefixLength,
    ...(ports && ports.length > 0 ? { ports } : {}),
    hostname: hostnameOf(vmi),
    ...(vmi.spec?.subdomain ? { subdomain: vmi.spec.subdomain } : {}),
    ...(dhcpOptions ? { dhcpOptions } : {}),
  };
}

/** The interface's NIC model (default virtio); a MasqueradeError for one KubeVirt does not know. */
export function nicModelOf(iface: { readonly name: string; readonly model?: string }): NicModel {
  const model = (iface.model ?? "virtio") as NicModel;
  if (!NIC_MODELS.includes(model))
    throw new MasqueradeError(`interface ${iface.name} has an unsupported model "${iface.model}"`);
  return model;
}

/** The guest's host name in its lease: the pod's (KubeVirt's), which is the VMI's hostname or else its name. */
export function hostnameOf(vmi: VirtualMachineInstance): string {
  return (vmi.spec?.hostname ?? vmi.metadata?.name ?? "vmi").slice(0, 63);
}

/** The gateway (first host) and guest (second host) of a CIDR, and its prefix length (KubeVirt's rule). */
export function masqueradeAddresses(cidr: string): [string, string, number] {
  const m = /^(\d+)\.(\d+)\.(\d+)\.(\d+)\/(\d+)$/.exec(cidr);
  const parts = m ? m.slice(1, 5).map(Number) : [];
  const len = m ? Number(m[5]) : Number.NaN;
  if (!m || parts.some((p) => p > 255) || len < 1 || len > 30)
    throw new MasqueradeError(`vmNetworkCIDR "${cidr}" is not an IPv4 network of at least 4 addresses`);
  const base = ((parts[0] << 24) | (parts[1] << 16) | (parts[2] << 8) | parts[3]) >>> 0;
  const net = (base & ((0xffffffff << (32 - len)) >>> 0)) >>> 0;
  const ip = (n: number): string => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join(".");
  return [ip(net + 1), ip(net + 2), len];
}

/** A MAC as the launcher writes it: lower case, colon-separated (KubeVirt accepts `-` too). */
export function normalizeMac(mac: string | undefined): string | undefined {
  return mac ? mac.replaceAll("-", ":").toLowerCase() : undefined;
}

/**
 * A MAC for an interface without `macAddress`: locally administered, unicast, from the VMI's uid and the
 * interface's name, so the target of a migration computes the same one.
 */
export function generatedMac(uid: string, name: string): string {
  let h = 0x811c9dc5;
  for (const ch of `${uid}/${name}`) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193) >>> 0;
  let g = 0x9e3779b9;
  for (const ch of `${name}/${uid}`) g = Math.imul(g ^ ch.charCodeAt(0), 0x01000193) >>> 0;
  const bytes = [0x02, (h >>> 24) & 255, (h >>> 16) & 255, (h >>> 8) & 255, h & 255, g & 255];
  return bytes.map((b) => b.toString(16).padStart(2, "0")).join(":");
}

/** The nftables script (`nft -f -`) of the plan: KubeVirt's masquerade rules plus the migration ports' returns. */
export function masqueradeRuleset(plan: MasqueradePlan): string {
  const g = plan.guestIp;
  const lines = [
    "add table ip nat",
    "add chain ip nat prerouting { type nat hook prerouting priority -100; }",
    "add chain ip nat input { type nat hook input priority 100; }",
    "add chain ip nat output { type nat hook output priority -100; }",
    "add chain ip nat postrouting { type nat hook postrouting priority 100; }",
    "add chain ip nat KUBEVIRT_PREINBOUND",
    "add chain ip nat KUBEVIRT_POSTINBOUND",
    `add rule ip nat postrouting ip saddr ${g} counter masquerade`,
    `add rule ip nat prerouting iifname ${POD_INTERFACE} counter jump KUBEVIRT_PREINBOUND`,
    `add rule ip nat postrouting oifname ${BRIDGE} counter jump KUBEVIRT_POSTINBOUND`,
    `add rule ip nat KUBEVIRT_PREINBOUND tcp dport { ${MIGRATION_PORTS.join(", ")} } counter return`,
  ];
  if (!plan.ports) {
    lines.push(
      `add rule ip nat KUBEVIRT_PREINBOUND counter dnat to ${g}`,
      `add rule ip nat KUBEVIRT_POSTINBOUND ip saddr { 127.0.0.1 } counter snat to ${plan.gateway}`,
      `add rule ip nat output ip daddr { 127.0.0.1 } counter dnat to ${g}`,
    );
  } else {
    for (const { protocol, port } of plan.ports) {
      lines.push(
        `add rule ip nat KUBEVIRT_PREINBOUND ${protocol} dport { ${port} } counter dnat to ${g}`,
        `add rule ip nat KUBEVIRT_POSTINBOUND ${protocol} dport ${port} ip saddr { 127.0.0.1 } counter snat to ${plan.gateway}`,
        `add rule ip nat output ip daddr { 127.0.0.1 } ${protocol} dport ${port} counter dnat to ${g}`,
      );
    }
  }
  return `${lines.join("\n")}\n`;
}

/** The name servers and search domains of a resolv.conf (moved to guest-lease.ts, shared by both bindings). */
export { parseResolvConf } from "./guest-lease.ts";
