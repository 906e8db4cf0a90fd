/**
 * KubeVirt's `bridge` binding of the pod network, decided from the VMI and the pod's interface (pure). The guest
 * takes over the pod's address: the pod's eth0 becomes a port of an in-pod bridge, loses its addresses, and the
 * guest learns them (with the pod's gateway and routes) from the launcher's DHCP server.
 *
 *   before:  eth0 (pod IP/prefix, MAC P, routes via the gateway) ──veth── node's bridge
 *
 *   after:   guest eth0 (MAC P or interfaces[].macAddress; pod IP by DHCP) ── tap0 ──┐
 *            k6t-eth0 bridge 169.254.75.1<index>/32 (the DHCP server's address) <───┤
 *            eth0-nic (the pod's veth, renamed; no address; MAC of k6t-eth0; no learning) ──veth── node's bridge
 *            eth0 dummy (down; MAC P, the pod IP kept on it, as KubeVirt keeps it), arp_ignore=1 in the pod
 *
 * As KubeVirt's netpod (pkg/network/setup/netpod bridgeBindingSpec, discoverbridge.go) and DHCP configurator
 * (pkg/network/dhcp/bridge.go): only the pod's first global IPv4 address goes to the guest (no DHCPv6); the gateway
 * and the routes are the pod's routes through eth0, the subnet's own route left out; the guest's MAC is the spec's
 * macAddress, else the one the VMI status recorded, else the pod interface's. A pod without IPv4 gets the bridge
 * but no DHCP (KubeVirt's IPAMDisabled). Nothing here migrates: the pod's address is the guest's, and KubeVirt
 * refuses the migration (InterfaceNotLiveMigratable) unless the VMI carries the allow annotation.
 */
import { podInterface, type VirtualMachineInstance } from "@kvt/api";
import type { DhcpExtraOptions, DhcpRoute } from "./dhcp.ts";
import { dhcpExtraOf } from "./guest-lease.ts";
import {
  BRIDGE,
  hostnameOf,
  MasqueradeError,
  type NicModel,
  nicModelOf,
  normalizeMac,
  POD_INTERFACE,
  TAP,
} from "./masquerade-plan.ts";

/** The pod interface's name once it is a port of the bridge (KubeVirt's GenerateNewBridgedVmiInterfaceName). */
export const BRIDGED_POD_INTERFACE = `${POD_INTERFACE}-nic`;

/** How the launcher bridges the guest onto the pod network (what the VMI decides; the pod supplies the rest). */
export interface BridgePlan {
  readonly binding: "bridge";
  /** The interface's name in the VMI (`default`). */
  readonly name: string;
  readonly model: NicModel;
  /** The interface's position in spec.domain.devices.interfaces: the DHCP server's address is 169.254.75.1<index>. */
  readonly index: number;
  /** The guest's MAC when the VMI fixes it (macAddress, else status.interfaces); else the pod interface's. */
  readonly mac?: string;
  readonly hostname: string;
  readonly subdomain?: string;
  readonly dhcpOptions?: DhcpExtraOptions;
}

/**
 * The bridge plan of the VMI's pod interface, or undefined when it has none or another binding. Throws a
 * MasqueradeError for a model KubeVirt does not know.
 */
export function planBridge(vmi: VirtualMachineInstance): BridgePlan | undefined {
  const iface = podInterface(vmi);
  if (!iface?.bridge) return undefined;
  const interfaces = vmi.spec?.domain?.devices?.interfaces ?? [];
  const recorded = vmi.status?.interfaces?.find((i) => i.name === iface.name)?.mac;
  const mac = normalizeMac(iface.macAddress) ?? normalizeMac(recorded);
  const dhcpOptions = dhcpExtraOf(iface);
  return {
    binding: "bridge",
    name: iface.name,
    model: nicModelOf(iface),
    index: Math.max(
      0,
      interfaces.findIndex((i) => i.name === iface.name),
    ),
    ...(mac ? { mac } : {}),
    hostname: hostnameOf(vmi),
    ...(vmi.spec?.subdomain ? { subdomain: vmi.spec.subdomain } : {}),
    ...(dhcpOptions ? { dhcpOptions } : {}),
  };
}

/** True for a bridge plan (a masquerade plan has no `binding`). */
export function isBridgePlan(plan: object | undefined): plan is BridgePlan {
  return (plan as { binding?: unknown } | undefined)?.binding === "bridge";
}

/** The bridge's own address: KubeVirt's fake 169.254.75.1<index>/32, where the DHCP server answers from. */
export function fakeBridgeIp(index: number): string {
  return `169.254.75.1${index}`;
}

/** One address of an interface. */
export interface InterfaceAddress {
  readonly family: "inet" | "inet6";
  readonly ip: string;
  readonly prefixLength: number;
}

/** The pod's interface as found before the wiring (`ip -j addr show dev eth0`, `ip -j -4 route show`). */
export interface PodInterfaceState {
  readonly mac: string;
  readonly mtu: number;
  /** Its global addresses (IPv4 and IPv6; link-local ones left out). */
  readonly addresses: readonly InterfaceAddress[];
  /** The IPv4 routes of the main table through it; `destination` "0.0.0.0/0" is the default route. */
  readonly routes: readonly { readonly destination: string; readonly gateway?: string }[];
}

/** A pod interface the bridge binding cannot take over; the message says why. */
export class PodInterfaceError extends MasqueradeError {
  override name = "PodInterfaceError";
}

/**
 * The pod interface from iproute2's JSON (`ip -j addr show dev eth0` and `ip -j -4 route show`). Throws a
 * PodInterfaceError when the output does not describe one interface with a MAC.
 */
export function parsePodInterface(addrJson: string, routeJson: string): PodInterfaceState {
  const links = parseJsonArray(addrJson, "ip -j addr show");
  const link = links[0] as
    | {
        ifname?: string;
        address?: string;
        mtu?: number;
        addr_info?: { family?: string; local?: string; prefixlen?: number; scope?: string }[];
      }
    | undefined;
  if (!link || typeof link.address !== "string" || !/^([0-9a-f]{2}:){5}[0-9a-f]{2}$/.test(link.address))
    throw new PodInterfaceError(`the pod interface ${POD_INTERFACE} has no MAC address`);
  const addresses: InterfaceAddress[] = [];
  for (const a of link.addr_info ?? []) {
    if (a.scope !== "global" || (a.family !== "inet" && a.family !== "inet6")) continue;
    if (typeof a.local !== "string" || typeof a.prefixlen !== "number") continue;
    addresses.push({ family: a.family, ip: a.local, prefixLength: a.prefixlen });
  }
  const ifname = link.ifname ?? POD_INTERFACE;
  const routes = parseJsonArray(routeJson, "ip -j -4 route show")
    .map((r) => r as { dst?: string; gateway?: string; dev?: string; type?: string })
    .filter((r) => r.dev === ifname && (r.type === undefined || r.type === "unicast") && typeof r.dst === "string")
    .map((r) => ({
      destination: r.dst === "default" ? "0.0.0.0/0" : r.dst!.includes("/") ? r.dst! : `${r.dst}/32`,
      ...(r.gateway ? { gateway: r.gateway } : {}),
    }));
  return { mac: link.address, mtu: typeof link.mtu === "number" && link.mtu > 0 ? link.mtu : 1500, addresses, routes };
}

function parseJsonArray(text: string, what: string): unknown[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new PodInterfaceError(`${what} printed no JSON`, { cause: err });
  }
  if (!Array.isArray(value)) throw new PodInterfaceError(`${what} printed no list`);
  return value;
}

/** What the guest is told by DHCP (KubeVirt's DHCPConfig of the bridge binding). */
export interface BridgeLease {
  readonly mac: string;
  readonly ip: string;
  readonly prefixLength: number;
  /** The pod's gateway (option 3), when the pod routes through one. */
  readonly gateway?: string;
  /** The pod's routes through eth0 but its own subnet's (option 121; the default route among them). */
  readonly routes: readonly DhcpRoute[];
  /** The bridge's address, the server identifier. */
  readonly serverIp: string;
  readonly mtu: number;
}

/**
 * The lease of the guest, or undefined when the pod has no global IPv4 address (KubeVirt then runs no DHCP). The
 * gateway is the default route's, else the first route's with a next hop (a pod network without a default route,
 * as the local cluster's, still names its gateway that way).
 */
export function bridgeLease(plan: BridgePlan, pod: PodInterfaceState): BridgeLease | undefined {
  const v4 = pod.addresses.find((a) => a.family === "inet");
  if (!v4) return undefined;
  const subnet = `${networkOf(v4.ip, v4.prefixLength)}/${v4.prefixLength}`;
  const gateway =
    pod.routes.find((r) => r.destination === "0.0.0.0/0" && r.gateway)?.gateway ??
    pod.routes.find((r) => r.gateway)?.gateway;
  const routes = pod.routes
    .filter((r) => r.destination === "0.0.0.0/0" || canonical(r.destination) !== subnet)
    .map((r) => ({ destination: canonical(r.destination), gateway: r.gateway ?? "0.0.0.0" }));
  return {
    mac: plan.mac ?? pod.mac,
    ip: v4.ip,
    prefixLength: v4.prefixLength,
    ...(gateway ? { gateway } : {}),
    routes,
    serverIp: fakeBridgeIp(plan.index),
    mtu: pod.mtu,
  };
}

/** One `ip` (or `bridge`) invocation of the wiring: the program and its arguments. */
export type WiringCommand = readonly [program: "ip" | "bridge", ...args: string[]];

/**
 * The commands that build the bridge before the pod interface joins it (KubeVirt's nmstate order: the bridge,
 * then the pod interface, the tap, the dummy). The bridge gets its address only when the pod has IPv4.
 */
export function bridgeCommands(plan: BridgePlan, pod: PodInterfaceState): WiringCommand[] {
  const hasV4 = pod.addresses.some((a) => a.family === "inet");
  return [
    ["ip", "link", "add", BRIDGE, "type", "bridge"],
    ...(hasV4 ? [["ip", "addr", "add", `${fakeBridgeIp(plan.index)}/32`, "dev", BRIDGE] as WiringCommand] : []),
    ["ip", "link", "set", "dev", BRIDGE, "up"],
  ];
}

/**
 * The commands that move the pod interface into the bridge (with `bridgeMac`, the bridge's MAC it copies), add the
 * guest's tap and keep the pod's address on a dummy `eth0` (`placeholder`: "dummy", or "bridge", a port-less,
 * down bridge, on kernels built without the dummy driver).
 */
export function enslaveCommands(
  pod: PodInterfaceState,
  bridgeMac: string,
  placeholder: "dummy" | "bridge" = "dummy",
): WiringCommand[] {
  const nic = BRIDGED_POD_INTERFACE;
  const mtu = String(pod.mtu);
  return [
    ["ip", "link", "set", "dev", POD_INTERFACE, "down"],
    ["ip", "link", "set", "dev", POD_INTERFACE, "name", nic],
    ["ip", "link", "set", "dev", nic, "address", bridgeMac],
    ["ip", "link", "set", "dev", nic, "master", BRIDGE],
    ["ip", "addr", "flush", "dev", nic],
    ["ip", "link", "set", "dev", nic, "up"],
    ["bridge", "link", "set", "dev", nic, "learning", "off"],
    ["ip", "tuntap", "add", "dev", TAP, "mode", "tap"],
    ["ip", "link", "set", "dev", TAP, "mtu", mtu, "master", BRIDGE, "up"],
    ...placeholderCommands(pod, placeholder),
  ];
}

/** The pod's former interface name, address and MAC on an inert link (never up, no ports). */
export function placeholderCommands(pod: PodInterfaceState, type: "dummy" | "bridge"): WiringCommand[] {
  return [
    ["ip", "link", "add", POD_INTERFACE, "type", type],
    ["ip", "link", "set", "dev", POD_INTERFACE, "address", pod.mac, "mtu", String(pod.mtu)],
    ...pod.addresses.map(
      (a): WiringCommand => ["ip", "addr", "add", `${a.ip}/${a.prefixLength}`, "dev", POD_INTERFACE],
    ),
  ];
}

function ipNumber(ip: string): number {
  const p = ip.split(".").map(Number);
  return ((p[0] << 24) | (p[1] << 16) | (p[2] << 8) | p[3]) >>> 0;
}

function ipString(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join(".");
}

function networkOf(ip: string, prefixLength: number): string {
  const mask = prefixLength === 0 ? 0 : (0xffffffff << (32 - prefixLength)) >>> 0;
  return ipString((ipNumber(ip) & mask) >>> 0);
}

/** A CIDR with its host bits cleared (`10.1.2.3/16` -> `10.1.0.0/16`); other strings unchanged. */
function canonical(cidr: string): string {
  const m = /^(\d+\.\d+\.\d+\.\d+)\/(\d+)$/.exec(cidr);
  return m ? `${networkOf(m[1], Number(m[2]))}/${m[2]}` : cidr;
}
