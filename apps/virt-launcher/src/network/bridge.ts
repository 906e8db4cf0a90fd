/**
 * Wires the bridge binding inside the launcher pod's network namespace (bridge-plan.ts says what): reads the pod's
 * eth0 (address, MAC, MTU, routes), builds k6t-eth0 with KubeVirt's 169.254.75.1x address, moves eth0 into it as
 * eth0-nic without addresses, adds the guest's tap, keeps the pod's address on an inert `eth0`, sets arp_ignore=1
 * (the pod must not answer ARP for the address the guest now owns), and starts the guest's DHCP server with the
 * pod's address, gateway and routes. Only ever run in a pod's own namespace, never in a host's: afterwards the pod
 * has no route left of its own.
 */
import { execFile } from "node:child_process";
import { writeFileSync } from "node:fs";
import { promisify } from "node:util";
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
import { type DhcpServer, startDhcpServer } from "./dhcp-server.ts";
import { leaseDns } from "./guest-lease.ts";
import { linkExists, linkInfo, PodNetworkWiringError, readResolvConf, run } from "./masquerade.ts";
import { BRIDGE, POD_INTERFACE, TAP } from "./masquerade-plan.ts";

const exec = promisify(execFile);

/** The wired binding: the tap the VMM attaches the guest's NIC to, and what status.interfaces reports. */
export interface WiredBridge {
  readonly tap: string;
  readonly mac: string;
  /** The pod's addresses, now the guest's (status.interfaces ipAddress/ipAddresses; IPv4 only, as KubeVirt's). */
  readonly ipAddresses: readonly string[];
  /** Undefined when the pod had no IPv4 address to hand over (KubeVirt's IPAMDisabled). */
  readonly dhcp?: DhcpServer;
  close(): Promise<void>;
}

/** Wires `plan` in this process's network namespace and starts the guest's DHCP server. */
export async function wireBridge(plan: BridgePlan, log: Logger): Promise<WiredBridge> {
  if (await linkExists(BRIDGED_POD_INTERFACE))
    throw new PodNetworkWiringError(
      `the pod network is bridged already (${BRIDGED_POD_INTERFACE} exists): its address is not known any more`,
    );
  if (!(await linkExists(POD_INTERFACE)))
    throw new PodNetworkWiringError(`the pod has no ${POD_INTERFACE}: the bridge binding needs the pod network`);
  const pod = await readPodInterface();
  const lease = bridgeLease(plan, pod);
  await removeLeftovers(log);
  await runAll(bridgeCommands(plan, pod));
  const bridgeMac = (await linkInfo(BRIDGE)).address;
  if (!bridgeMac) throw new PodNetworkWiringError(`the bridge ${BRIDGE} has no MAC address`);
  const moves = enslaveCommands(pod, bridgeMac);
  const placeholder = moves.length - placeholderCommands(pod, "dummy").length;
  await runAll(moves.slice(0, placeholder));
  await keepPodAddress(pod, log);
  // The address stays on the placeholder (a local address of the pod): only the guest may answer ARP for it.
  if (lease) writeFileSync("/proc/sys/net/ipv4/conf/all/arp_ignore", "1\n");
  if (!lease) {
    log.warn({ tap: TAP }, "the pod has no IPv4 address: the guest gets no DHCP lease (KubeVirt's IPAM disabled)");
    return { tap: TAP, mac: plan.mac ?? pod.mac, ipAddresses: [], close: () => Promise.resolve() };
  }
  const dns = leaseDns(readResolvConf(), plan.subdomain);
  const dhcp = await startDhcpServer({
    mac: lease.mac,
    broadcast: "255.255.255.255",
    replyFrom: lease.serverIp,
    log,
    lease: {
      ip: lease.ip,
      prefixLength: lease.prefixLength,
      ...(lease.gateway ? { router: lease.gateway } : {}),
      serverIp: lease.serverIp,
      ...dns,
      hostname: plan.hostname,
      mtu: lease.mtu,
      leaseSeconds: 0xffffffff,
      routes: lease.routes,
      ...(plan.dhcpOptions ? { extra: plan.dhcpOptions } : {}),
    },
  });
  log.info(
    { tap: TAP, mac: lease.mac, guestIp: lease.ip, gateway: lease.gateway, routes: lease.routes.length },
    "bridge binding wired",
  );
  return { tap: TAP, mac: lease.mac, ipAddresses: [lease.ip], dhcp, close: () => dhcp.close() };
}

/**
 * The bridge and tap of an attempt that failed before eth0 joined the bridge (eth0 still holds the pod's address):
 * removed, so the next attempt starts over.
 */
async function removeLeftovers(log: Logger): Promise<void> {
  for (const link of [TAP, BRIDGE]) {
    if (!(await linkExists(link))) continue;
    log.warn({ link }, "removing a link a failed wiring attempt left behind");
    await run("ip", ["link", "del", "dev", link]);
  }
}

/** The pod's eth0 as iproute2 reports it. */
async function readPodInterface(): Promise<PodInterfaceState> {
  const [addr, routes] = await Promise.all([
    exec("ip", ["-j", "addr", "show", "dev", POD_INTERFACE]),
    exec("ip", ["-j", "-4", "route", "show"]),
  ]).catch((err: unknown) => {
    throw new PodNetworkWiringError(`cannot read the pod interface ${POD_INTERFACE}: ${(err as Error).message}`, {
      cause: err,
    });
  });
  return parsePodInterface(addr.stdout, routes.stdout);
}

async function runAll(commands: readonly WiringCommand[]): Promise<void> {
  for (const [program, ...args] of commands) await run(program, args);
}

/**
 * The pod's former eth0 as KubeVirt keeps it: a dummy link, down, with the pod's MAC and addresses. A kernel built
 * without the dummy driver gets an empty, down bridge in its place: as inert (no ports, no carrier).
 */
async function keepPodAddress(pod: PodInterfaceState, log: Logger): Promise<void> {
  try {
    await runAll(placeholderCommands(pod, "dummy").slice(0, 1));
  } catch (err) {
    if (!/Unknown device type|not supported/i.test((err as Error).message)) throw err;
    log.info({ link: POD_INTERFACE }, "the kernel has no dummy links: the pod's address is kept on an empty bridge");
    await runAll(placeholderCommands(pod, "bridge").slice(0, 1));
  }
  await runAll(placeholderCommands(pod, "dummy").slice(1));
}
