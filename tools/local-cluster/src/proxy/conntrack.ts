/**
 * Stale flows, as kube-proxy clears them (pkg/proxy/conntrack/cleanup.go): when an endpoint stops serving a UDP
 * Service port, the host's conntrack entries of flows that port's ClusterIP had DNATed to it are deleted (Debian's
 * `conntrack -D`, through @kvt/pod-network's deleter), so the flows' next datagrams go through the Service's rules
 * again and reach a serving endpoint:
 *
 *   Service 10.M.0.7:53/udp --DNAT--> pod 10.N.1.5:5353        (conntrack entry, reply-src 10.N.1.5)
 *   the pod stops serving; proxy: table rewritten, then
 *   `conntrack -D -p udp --orig-dst 10.M.0.7 --orig-port-dst 53 --reply-src 10.N.1.5`
 *   the client's next datagram --DNAT--> a serving endpoint
 *
 * TCP flows are left, as kube-proxy leaves them (a TCP server that went away answers with a reset; a terminating one
 * drains). The TCP connections of a live-migrated VM, which outlive its source pod, are virt-handler's to clear
 * (--clear-migrated-flows), here as on a real cluster. Only addresses that left the serving set are cleared (not
 * ones that merely stopped being ready while terminating).
 */
import { type ConntrackFlows, conntrackDeleter } from "@kvt/pod-network";
import type { ServicePortRoute } from "./nft-ruleset.ts";

/** The flows of one Service port DNATed to one endpoint address. */
export interface StaleFlows {
  readonly protocol: ServicePortRoute["protocol"];
  readonly clusterIP: string;
  readonly port: number;
  /** The endpoint that no longer serves: the flows' reply source. */
  readonly endpoint: string;
}

const routeKey = (r: ServicePortRoute): string => `${r.protocol}/${r.clusterIP}/${String(r.port)}`;

/**
 * The flows to clear going from the routes `before` to the routes `after` (pure): for each UDP Service port in both,
 * every address serving it before and not after. A port that is gone altogether is rejected by the new table, and its
 * flows' packets are rejected with it; a port that is new has no flows; TCP and SCTP flows are left (kube-proxy's).
 */
export function staleFlows(before: readonly ServicePortRoute[], after: readonly ServicePortRoute[]): StaleFlows[] {
  const next = new Map(after.map((r) => [routeKey(r), new Set(r.serving)]));
  const out: StaleFlows[] = [];
  for (const r of before) {
    if (r.protocol !== "udp") continue;
    const still = next.get(routeKey(r));
    if (!still) continue;
    for (const endpoint of r.serving)
      if (!still.has(endpoint)) out.push({ protocol: r.protocol, clusterIP: r.clusterIP, port: r.port, endpoint });
  }
  return out;
}

/** The conntrack entries of these flows (pure): the Service port before DNAT, the endpoint as the replies' source. */
export function staleFlowEntries(f: StaleFlows): ConntrackFlows {
  return { protocol: f.protocol, origDst: f.clusterIP, origDstPort: f.port, replySource: f.endpoint };
}

/** Deletes the conntrack entries of these flows; resolves with how many were deleted, rejects with the tool's message. */
export type ConntrackRunner = (flows: StaleFlows) => Promise<number>;

const deleteHere = conntrackDeleter();

/** Runs Debian's `conntrack -D` in this process's namespace (the host's, where the proxy's rules are). */
export const runConntrack: ConntrackRunner = (flows) => deleteHere(staleFlowEntries(flows));
