/**
 * Where this launcher sits on the network, from its environment, and what follows from that:
 *
 *   POD_IP set    the launcher runs in its pod's own network namespace (the downward API's status.podIP; the
 *                 process-kubelet sets it only for a pod it gave a sandbox): an incoming migration listens on the
 *                 pod IP at KubeVirt's migration port, which the source launcher in another pod reaches.
 *   POD_IP unset  the launcher shares a host's network (run by hand, tests, a kubelet without a pod network): an
 *                 incoming migration listens on 127.0.0.1, at any free port.
 *
 * Wiring the VMI's pod-network binding (bridge, tap, nftables) needs CAP_NET_ADMIN in the pod's namespace and the
 * `ip` and `nft` tools. The process-kubelet's launcher runs as root and has both, so it wires the binding itself. A
 * real node's launcher runs as user 107 with no capabilities and an image without those tools, so it leaves the pod
 * network alone, as KubeVirt's launcher does (virt-handler wires it there), and still listens on the pod IP: the
 * migration port does not depend on the binding.
 */
import { readFileSync } from "node:fs";
import { MIGRATION_PORTS } from "./masquerade-plan.ts";

/** The capability bit of CAP_NET_ADMIN (linux/capability.h). */
const CAP_NET_ADMIN = 12;

/** The launcher's network placement, as machineFactory() takes it. */
export interface LauncherNetwork {
  /** Where an incoming migration listens and what the target hands to the source; undefined: 127.0.0.1. */
  readonly migrationHost?: string;
  /** The port an incoming migration listens on; undefined: any free port. */
  readonly migrationPort?: number;
  /** Wire the VMI's pod-network binding in this process (its pod's namespace, with CAP_NET_ADMIN). */
  readonly inPodNetwork: boolean;
  /** The pod's IP, for status.interfaces. */
  readonly podIp?: string;
}

/**
 * The placement for POD_IP (`podIp`, undefined or empty: not in a pod's own namespace) and whether this process may
 * change its network namespace (`netAdmin`: {@link holdsNetAdmin}). Pure.
 */
export function launcherNetwork(podIp: string | undefined, netAdmin: boolean): LauncherNetwork {
  if (!podIp) return { inPodNetwork: false };
  return { migrationHost: podIp, migrationPort: MIGRATION_PORTS[0], inPodNetwork: netAdmin, podIp };
}

/**
 * True when CAP_NET_ADMIN is in the effective set of a /proc/<pid>/status text (`CapEff:`, hexadecimal). A status
 * without a readable CapEff line holds nothing.
 */
export function holdsNetAdmin(procStatus: string): boolean {
  const hex = /^CapEff:\s*([0-9a-fA-F]+)\s*$/m.exec(procStatus)?.[1];
  if (hex === undefined) return false;
  return ((BigInt(`0x${hex}`) >> BigInt(CAP_NET_ADMIN)) & 1n) === 1n;
}

/** Whether this process holds CAP_NET_ADMIN (false where /proc/self/status cannot be read). */
export function processHoldsNetAdmin(): boolean {
  try {
    return holdsNetAdmin(readFileSync("/proc/self/status", "utf8"));
  } catch {
    return false; // no procfs: nothing proves the capability, so the launcher does not try to wire
  }
}
