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
 * `ip` and `nft` tools. The process-kubelet's launcher runs as root and has both, so it wires the binding itself
 * (`self`). A real node's launcher runs as user 107 with no capabilities and an image without those tools: as
 * KubeVirt's, it leaves the plumbing to virt-handler, which enters the pod's namespace before it syncs the VMI and
 * leaves the result in the pod (@kvt/pod-network HANDOVER_FILE); the launcher only opens the tap and serves DHCP
 * (`node`). It listens on the pod IP either way: the migration port does not depend on the binding.
 */
import { readFileSync } from "node:fs";
import { holdsNetAdmin, MIGRATION_PORTS } from "@kvt/pod-network";

export { holdsNetAdmin } from "@kvt/pod-network";

/** The launcher's network placement, as machineFactory() takes it. */
export interface LauncherNetwork {
  /** Where an incoming migration listens and what the target hands to the source; undefined: 127.0.0.1. */
  readonly migrationHost?: string;
  /** The port an incoming migration listens on; undefined: any free port. */
  readonly migrationPort?: number;
  /** The launcher is in its pod's own namespace: the VMI's pod-network binding is set up there. */
  readonly inPodNetwork: boolean;
  /** Who plumbs the binding: this launcher (`self`, with CAP_NET_ADMIN) or virt-handler (`node`); set in a pod. */
  readonly podNetworkWiring?: "self" | "node";
  /** The pod's IP, for status.interfaces. */
  readonly podIp?: string;
}

/**
 * The placement for POD_IP (`podIp`, undefined or empty: not in a pod's own namespace) and whether this process may
 * change its network namespace (`netAdmin`: {@link holdsNetAdmin}). Pure.
 */
export function launcherNetwork(podIp: string | undefined, netAdmin: boolean): LauncherNetwork {
  if (!podIp) return { inPodNetwork: false };
  return {
    migrationHost: podIp,
    migrationPort: MIGRATION_PORTS[0],
    inPodNetwork: true,
    podNetworkWiring: netAdmin ? "self" : "node",
    podIp,
  };
}

/** Whether this process holds CAP_NET_ADMIN (false where /proc/self/status cannot be read). */
export function processHoldsNetAdmin(): boolean {
  try {
    return holdsNetAdmin(readFileSync("/proc/self/status", "utf8"));
  } catch {
    return false; // no procfs: nothing proves the capability, so the launcher does not try to wire
  }
}
