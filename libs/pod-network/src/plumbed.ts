/**
 * The seam between the two halves of a pod-network binding, as KubeVirt splits them (virt-handler's privileged
 * phase 1, the launcher's unprivileged phase 2):
 *
 *   plumb (CAP_NET_ADMIN in the pod's namespace)          serve (the launcher, any user)
 *   bridge, tap, NAT, sysctls  ── PlumbedPodNetwork ──>   opens the tap (the VMM), DHCP on port 67
 *                                 (JSON: handed over
 *                                  in a file when the
 *                                  plumbing ran elsewhere)
 *
 * A launcher holding CAP_NET_ADMIN (the process-kubelet's, root) does both itself; on a real node virt-handler
 * plumbs and writes the result into the launcher pod ({@link HANDOVER_FILE}), and the launcher serves it.
 */
import { readFileSync } from "node:fs";
import type { Logger } from "@kvt/observability";
import type { DhcpLease } from "./dhcp.ts";
import { type DhcpServer, startDhcpServer } from "./dhcp-server.ts";
import { leaseDns } from "./guest-lease.ts";

/**
 * Where, inside the launcher's container, virt-handler leaves the plumbing's result: the launcher's private emptyDir
 * (KubeVirt's /var/run/kubevirt-private, where its handler caches the pod interface for the launcher as well).
 */
export const HANDOVER_FILE = "/var/run/kubevirt-private/pod-network.json";

/** What plumbing the pod's namespace takes from the caller. */
export interface PlumbOptions {
  /** The user owning the guest's tap (the launcher's, 107), so it opens the tap without privileges. */
  readonly tapOwner?: number;
  /** net.ipv4.ip_unprivileged_port_start in the pod (KubeVirt's 0): the launcher's DHCP server binds port 67. */
  readonly unprivilegedPortStart?: number;
}

/** The lease the plumbing decided; the name servers come from the launcher's own resolv.conf when it serves. */
export type PlumbedLease = Omit<DhcpLease, "dns" | "searchDomains" | "domainName" | "hostname" | "extra">;

/** The result of plumbing: what the launcher needs to attach the guest and serve its DHCP. JSON-safe. */
export interface PlumbedPodNetwork {
  readonly tap: string;
  readonly mac: string;
  /** The pod's IPs for status.interfaces (bridge: the addresses handed to the guest); undefined: POD_IP. */
  readonly ipAddresses?: readonly string[];
  /** The guest's DHCP; undefined: none (a bridged pod without IPv4, KubeVirt's IPAM disabled). */
  readonly dhcp?: {
    readonly mac: string;
    readonly broadcast: string;
    /** Send replies from this local address (the bridge binding's 169.254.75.1x). */
    readonly replyFrom?: string;
    readonly lease: PlumbedLease;
  };
}

/** A wired binding: the tap for the guest's NIC, its MAC, and the guest's addresses as status.interfaces shows them. */
export interface WiredPodNetwork {
  readonly tap: string;
  readonly mac: string;
  /** The pod's IPs for status.interfaces (bridge: the addresses it handed to the guest); undefined: POD_IP. */
  readonly ipAddresses?: readonly string[];
  readonly dhcp?: DhcpServer;
  close(): Promise<void>;
}

/** What serving takes from the VMI's plan (both bindings' plans carry these). */
export interface ServedPlan {
  readonly hostname: string;
  readonly subdomain?: string;
  readonly dhcpOptions?: DhcpLease["extra"];
}

/** Starts the guest's DHCP server for `plumbed` (in the pod's namespace: this process's). */
export async function servePodNetwork(
  plumbed: PlumbedPodNetwork,
  plan: ServedPlan,
  log: Logger,
): Promise<WiredPodNetwork> {
  const base = {
    tap: plumbed.tap,
    mac: plumbed.mac,
    ...(plumbed.ipAddresses ? { ipAddresses: plumbed.ipAddresses } : {}),
  };
  if (!plumbed.dhcp) return { ...base, close: () => Promise.resolve() };
  const dns = leaseDns(readResolvConf(), plan.subdomain);
  const dhcp = await startDhcpServer({
    mac: plumbed.dhcp.mac,
    broadcast: plumbed.dhcp.broadcast,
    ...(plumbed.dhcp.replyFrom ? { replyFrom: plumbed.dhcp.replyFrom } : {}),
    log,
    lease: {
      ...plumbed.dhcp.lease,
      ...dns,
      hostname: plan.hostname,
      ...(plan.dhcpOptions ? { extra: plan.dhcpOptions } : {}),
    },
  });
  return { ...base, dhcp, close: () => dhcp.close() };
}

/** A handover file that is not a plumbing result. */
export class HandoverError extends Error {
  override name = "HandoverError";
}

/** Parses a handover file's text; a HandoverError when it lacks the tap or MAC or carries a malformed DHCP part. */
export function parseHandover(text: string): PlumbedPodNetwork {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new HandoverError("the pod network handover is not JSON", { cause: err });
  }
  const v = value as Partial<PlumbedPodNetwork> | null;
  if (!v || typeof v.tap !== "string" || typeof v.mac !== "string")
    throw new HandoverError("the pod network handover names no tap and MAC");
  const d = v.dhcp;
  if (
    d !== undefined &&
    (typeof d.mac !== "string" ||
      typeof d.broadcast !== "string" ||
      typeof d.lease?.ip !== "string" ||
      typeof d.lease.prefixLength !== "number" ||
      typeof d.lease.serverIp !== "string")
  )
    throw new HandoverError("the pod network handover's DHCP lease is incomplete");
  return v as PlumbedPodNetwork;
}

/** The pod's /etc/resolv.conf, or undefined when it has none (the lease then carries no name servers). */
export function readResolvConf(): string | undefined {
  try {
    return readFileSync("/etc/resolv.conf", "utf8");
  } catch {
    return undefined; // KubeVirt's lease carries no name servers when the pod has none
  }
}
