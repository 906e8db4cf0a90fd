/**
 * One scheduling decision (pure): filter the nodes with the predicates, then pick the least-loaded survivor
 * (fewest bound pods, then name, so decisions are deterministic). When none fits, the message reads as
 * kube-scheduler's: `0/2 nodes are available: 1 Insufficient devices.kubevirt.io/kvm, 1 node(s) didn't match ...`.
 */
import type { V1Pod } from "@kubernetes/client-node";
import { type ClusterSnapshot, filterNode, type QuantityParser } from "./predicates.ts";

/** The outcome of scheduling one pod. */
export type ScheduleResult = { readonly nodeName: string } | { readonly unschedulable: string };

/** Decides where `pod` goes in `snapshot`. */
export function schedulePod(pod: V1Pod, snapshot: ClusterSnapshot, parse: QuantityParser): ScheduleResult {
  const reasons = new Map<string, number>();
  const fits: { name: string; pods: number }[] = [];
  for (const node of snapshot.nodes) {
    const reason = filterNode(pod, node, snapshot, parse);
    const name = node.metadata?.name ?? "";
    if (reason) reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
    else fits.push({ name, pods: snapshot.boundPods.filter((p) => p.spec?.nodeName === name).length });
  }
  if (fits.length > 0) {
    fits.sort((a, b) => a.pods - b.pods || a.name.localeCompare(b.name));
    return { nodeName: fits[0].name };
  }
  const parts = [...reasons].sort(([a], [b]) => a.localeCompare(b)).map(([r, n]) => `${n} ${r}`);
  const detail = parts.length ? ` ${parts.join(", ")}.` : "";
  return { unschedulable: `0/${snapshot.nodes.length} nodes are available:${detail}` };
}
