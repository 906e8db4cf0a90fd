/**
 * Wires the bridge binding inside the launcher pod's network namespace (bridge-plan.ts says what): reads the pod's
 * eth0 (address, MAC, MTU, routes), builds k6t-eth0 with KubeVirt's 169.254.75.1x address, moves eth0 into it as
 * eth0-nic without addresses, adds the guest's tap, keeps the pod's address on an inert `eth0`, sets arp_ignore=1
 * (the pod must not answer ARP for the address the guest now owns), and starts the guest's DHCP server with the
 * pod's address, gateway and routes (plumbBridge, in whichever namespace it is handed: netns.ts; the DHCP server:
 * plumbed.ts). Only ever run in a pod's own namespace, never in a host's: afterwards the pod
 * has no route left of its own.
 */
import type { Logger } from "@kvt/observability";
import {
  BRIDGED_POD_INTERFACE,
  type BridgePlan,
  bridgeCommands,
  bridgeLease,
  enslaveCommands,
  type PodInterfaceState,
  parsePodInterface,
  placeholderCommands,
  type WiringCommand,
} from "./bridge-plan.ts";
import { linkExists, linkInfo, PodNetworkWiringError, tapAddArgs } from "./masquerade.ts";
import { BRIDGE, POD_INTERFACE, TAP } from "./masquerade-plan.ts";
import { CriticalNetworkError, type Netns, ownNetns } from "./netns.ts";
import { type PlumbedPodNetwork, type PlumbOptions, servePodNetwork, type WiredPodNetwork } from "./plumbed.ts";

/** Wires `plan` in this process's network namespace and starts the guest's DHCP server. */
export async function wireBridge(plan: BridgePlan, log: Logger): Promise<WiredPodNetwork> {
  const plumbed = await plumbBridge(plan, ownNetns(), log);
  if (!plumbed.dhcp)
    log.warn({ tap: TAP }, "the pod has no IPv4 address: the guest gets no DHCP lease (KubeVirt's IPAM disabled)");
  const wired = await servePodNetwork(plumbed, plan, log);
  log.info(
    { tap: TAP, mac: plumbed.mac, guestIp: plumbed.dhcp?.lease.ip, gateway: plumbed.dhcp?.lease.router },
    "bridge binding wired",
  );
  return wired;
}

/**
 * Builds the bridge binding in `ns` and says what the guest's DHCP server hands out (the pod's address, gateway and
 * routes, read before eth0 gives them up). Not idempotent: once eth0 is bridged its address is only in the result,
 * so a failure from then on, or a namespace found bridged already, is a {@link CriticalNetworkError} (the VMI fails
 * rather than being retried forever); a failure before it leaves the pod as it was, and the next attempt starts over.
 */
export async function plumbBridge(
  plan: BridgePlan,
  ns: Netns,
  log: Logger,
  options: PlumbOptions = {},
): Promise<PlumbedPodNetwork> {
  if (await linkExists(ns, BRIDGED_POD_INTERFACE))
    throw new CriticalNetworkError(
      `the pod network is bridged already (${BRIDGED_POD_INTERFACE} exists) by an attempt that did not finish: ` +
        "the pod's address is not known any more; a new launcher pod is needed",
    );
  if (!(await linkExists(ns, POD_INTERFACE)))
    throw new PodNetworkWiringError(`the pod has no ${POD_INTERFACE}: the bridge binding needs the pod network`);
  const pod = await readPodInterface(ns);
  const lease = bridgeLease(plan, pod);
  await removeLeftovers(ns, log);
  await runAll(ns, bridgeCommands(plan, pod));
  const bridgeMac = (await linkInfo(ns, BRIDGE)).address;
  if (!bridgeMac) throw new PodNetworkWiringError(`the bridge ${BRIDGE} has no MAC address`);
  const moves = enslaveCommands(pod, bridgeMac).map((c) => withTapOwner(c, options.tapOwner));
  const placeholder = moves.length - placeholderCommands(pod, "dummy").length;
  try {
    await runAll(ns, moves.slice(0, placeholder));
    await keepPodAddress(ns, pod, log);
    // The address stays on the placeholder (a local address of the pod): only the guest may answer ARP for it.
    if (lease) await ns.setSysctl("net.ipv4.conf.all.arp_ignore", "1");
    if (options.unprivilegedPortStart !== undefined)
      await ns.setSysctl("net.ipv4.ip_unprivileged_port_start", String(options.unprivilegedPortStart));
  } catch (err) {
    throw new CriticalNetworkError(
      `the bridge binding failed after the pod's ${POD_INTERFACE} joined the bridge: ${(err as Error).message}`,
      { cause: err },
    );
  }
  if (!lease) return { tap: TAP, mac: plan.mac ?? pod.mac, ipAddresses: [] };
  return {
    tap: TAP,
    mac: lease.mac,
    ipAddresses: [lease.ip],
    dhcp: {
      mac: lease.mac,
      broadcast: "255.255.255.255",
      replyFrom: lease.serverIp,
      lease: {
        ip: lease.ip,
        prefixLength: lease.prefixLength,
        ...(lease.gateway ? { router: lease.gateway } : {}),
        serverIp: lease.serverIp,
        mtu: lease.mtu,
        leaseSeconds: 0xffffffff,
        routes: lease.routes,
      },
    },
  };
}

/** The plan's `ip tuntap add` with the tap's owner (masquerade.ts tapAddArgs); other commands unchanged. */
function withTapOwner(command: WiringCommand, owner: number | undefined): WiringCommand {
  const [program, ...args] = command;
  if (program !== "ip" || args[0] !== "tuntap") return command;
  return ["ip", ...tapAddArgs(owner)];
}

/**
 * The bridge and tap of an attempt that failed before eth0 joined the bridge (eth0 still holds the pod's address):
 * removed, so the next attempt starts over.
 */
async function removeLeftovers(ns: Netns, log: Logger): Promise<void> {
  for (const link of [TAP, BRIDGE]) {
    if (!(await linkExists(ns, link))) continue;
    log.warn({ link }, "removing a link a failed wiring attempt left behind");
    await ns.exec("ip", ["link", "del", "dev", link]);
  }
}

/** The pod's eth0 as iproute2 reports it. */
async function readPodInterface(ns: Netns): Promise<PodInterfaceState> {
  const [addr, routes] = await Promise.all([
    ns.exec("ip", ["-j", "addr", "show", "dev", POD_INTERFACE]),
    ns.exec("ip", ["-j", "-4", "route", "show"]),
  ]).catch((err: unknown) => {
    throw new PodNetworkWiringError(`cannot read the pod interface ${POD_INTERFACE}: ${(err as Error).message}`, {
      cause: err,
    });
  });
  return parsePodInterface(addr, routes);
}

async function runAll(ns: Netns, commands: readonly WiringCommand[]): Promise<void> {
  for (const [program, ...args] of commands) await ns.exec(program, args);
}

/**
 * The pod's former eth0 as KubeVirt keeps it: a dummy link, down, with the pod's MAC and addresses. A kernel built
 * without the dummy driver gets an empty, down bridge in its place: as inert (no ports, no carrier).
 */
async function keepPodAddress(ns: Netns, pod: PodInterfaceState, log: Logger): Promise<void> {
  try {
    await runAll(ns, placeholderCommands(pod, "dummy").slice(0, 1));
  } catch (err) {
    if (!/Unknown device type|not supported/i.test((err as Error).message)) throw err;
    log.info({ link: POD_INTERFACE }, "the kernel has no dummy links: the pod's address is kept on an empty bridge");
    await runAll(ns, placeholderCommands(pod, "bridge").slice(0, 1));
  }
  await runAll(ns, placeholderCommands(pod, "dummy").slice(1));
}
