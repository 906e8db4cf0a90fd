/**
 * Wires the masquerade binding inside the launcher pod's network namespace (masquerade-plan.ts says what): the
 * k6t-eth0 bridge with the gateway address, the guest's tap on it, IPv4 forwarding in the pod, KubeVirt's nftables
 * NAT (plumbMasquerade, in whichever namespace it is handed: netns.ts), and then the DHCP server (plumbed.ts). Only
 * ever run in a pod's own namespace (the process-kubelet's or a real node's pod network), never in a host's.
 * Idempotent for a migration target that finds the devices already there.
 */
import type { Logger } from "@kvt/observability";
import { BRIDGE, type MasqueradePlan, masqueradeRuleset, POD_INTERFACE, TAP } from "./masquerade-plan.ts";
import { type Netns, ownNetns, PodNetworkWiringError } from "./netns.ts";
import { type PlumbedPodNetwork, type PlumbOptions, servePodNetwork, type WiredPodNetwork } from "./plumbed.ts";

export { PodNetworkWiringError } from "./netns.ts";

/**
 * A link of the namespace as `ip -j link show` reports it. Never read from /sys/class/net: sysfs shows the links of
 * the namespace it was mounted in, and a process entering a pod's namespace (nsenter) keeps its own mount.
 */
export async function linkInfo(ns: Netns, name: string): Promise<{ readonly address?: string; readonly mtu?: number }> {
  const stdout = await ns.exec("ip", ["-j", "link", "show", "dev", name]);
  let link: { address?: unknown; mtu?: unknown } | undefined;
  try {
    [link] = JSON.parse(stdout) as { address?: unknown; mtu?: unknown }[];
  } catch (err) {
    throw new PodNetworkWiringError(`cannot read the link ${name}: ip printed no JSON`, { cause: err });
  }
  return {
    ...(typeof link?.address === "string" ? { address: link.address } : {}),
    ...(typeof link?.mtu === "number" ? { mtu: link.mtu } : {}),
  };
}

/** True when the namespace has a link of that name. */
export async function linkExists(ns: Netns, name: string): Promise<boolean> {
  return ns.exec("ip", ["link", "show", "dev", name]).then(
    () => true,
    () => false,
  );
}

/** `ip tuntap add` for the guest's tap, owned by `owner` (a user who may then open it without privileges). */
export function tapAddArgs(owner: number | undefined): string[] {
  const args = ["tuntap", "add", "dev", TAP, "mode", "tap"];
  return owner === undefined ? args : [...args, "user", String(owner), "group", String(owner)];
}

/**
 * Builds the masquerade binding in `ns` (the bridge, the tap, forwarding, the NAT) and says what the launcher's DHCP
 * server hands out. Idempotent: a namespace that has the bridge already (a migration target's retry) is left as is.
 */
export async function plumbMasquerade(
  plan: MasqueradePlan,
  ns: Netns,
  options: PlumbOptions = {},
): Promise<PlumbedPodNetwork> {
  if (!(await linkExists(ns, POD_INTERFACE)))
    throw new PodNetworkWiringError(`the pod has no ${POD_INTERFACE}: the masquerade binding needs the pod network`);
  const mtu = (await linkInfo(ns, POD_INTERFACE)).mtu ?? 1500;
  if (!(await linkExists(ns, BRIDGE))) {
    await ns.exec("ip", ["link", "add", BRIDGE, "type", "bridge"]);
    await ns.exec("ip", ["addr", "add", `${plan.gateway}/${plan.prefixLength}`, "dev", BRIDGE]);
    await ns.exec("ip", ["link", "set", BRIDGE, "mtu", String(mtu), "up"]);
    await ns.exec("ip", tapAddArgs(options.tapOwner));
    await ns.exec("ip", ["link", "set", TAP, "mtu", String(mtu), "master", BRIDGE, "up"]);
    // Forwarding between the guest's bridge and eth0, in this pod's namespace only (the sysctl is per namespace).
    await ns.setSysctl("net.ipv4.ip_forward", "1");
    await ns.exec("nft", ["-f", "-"], masqueradeRuleset(plan));
  }
  if (options.unprivilegedPortStart !== undefined)
    await ns.setSysctl("net.ipv4.ip_unprivileged_port_start", String(options.unprivilegedPortStart));
  return {
    tap: TAP,
    mac: plan.mac,
    dhcp: {
      mac: plan.mac,
      broadcast: broadcastOf(plan.gateway, plan.prefixLength),
      lease: {
        ip: plan.guestIp,
        prefixLength: plan.prefixLength,
        router: plan.gateway,
        serverIp: plan.gateway,
        mtu,
        leaseSeconds: 0xffffffff,
      },
    },
  };
}

/** The broadcast address of the network of `ip`/`prefixLength`. */
export function broadcastOf(ip: string, prefixLength: number): string {
  const p = ip.split(".").map(Number);
  const base = ((p[0] << 24) | (p[1] << 16) | (p[2] << 8) | p[3]) >>> 0;
  const bcast = (base | (2 ** (32 - prefixLength) - 1)) >>> 0;
  return [bcast >>> 24, (bcast >>> 16) & 255, (bcast >>> 8) & 255, bcast & 255].join(".");
}

/** Wires `plan` in this process's network namespace and starts the guest's DHCP server. */
export async function wireMasquerade(plan: MasqueradePlan, log: Logger): Promise<WiredPodNetwork> {
  const wired = await servePodNetwork(await plumbMasquerade(plan, ownNetns()), plan, log);
  log.info({ tap: TAP, mac: plan.mac, guestIp: plan.guestIp, ports: plan.ports ?? "all" }, "masquerade binding wired");
  return wired;
}
