/**
 * One scheduling decision (pure): filter the nodes with the predicates, then pick the least-loaded survivor
 * (fewest bound pods, then name, so decisions are deterministic). When none fits, the message reads as
 * kube-scheduler's: `0/2 nodes are available: 1 Insufficient devices.kubevirt.io/kvm, 1 node(s) didn't match ...`.
 */
import type { V1PersistentVolumeClaim, V1Pod } from "../cluster/kube-models.ts";
import { type ClusterSnapshot, filterNode, podsOnNode, type QuantityParser } from "./predicates.ts";
import { checkVolumes, type PodClaims, preFilterVolumes } from "./volume-binding.ts";

/**
 * The outcome of scheduling one pod. `delayedClaims` are the pod's unbound WaitForFirstConsumer claims: before the
 * pod is bound, each gets the chosen node as its volume.kubernetes.io/selected-node (PreBind).
 */
export type ScheduleResult =
  | { readonly nodeName: string; readonly delayedClaims?: readonly V1PersistentVolumeClaim[] }
  | { readonly unschedulable: string };

/** Decides where `pod` goes in `snapshot`. */
export function schedulePod(pod: V1Pod, snapshot: ClusterSnapshot, parse: QuantityParser): ScheduleResult {
  let claims: PodClaims | undefined;
  if (snapshot.volumes) {
    const pre = preFilterVolumes(pod, snapshot.volumes);
    if ("unresolvable" in pre)
      return { unschedulable: `0/${snapshot.nodes.length} nodes are available: ${pre.unresolvable}.` };
    claims = pre;
  }
  const reasons = new Map<string, number>();
  const fits: { name: string; pods: number }[] = [];
  for (const node of snapshot.nodes) {
    const reason =
      filterNode(pod, node, snapshot, parse) ??
      (claims && snapshot.volumes ? checkVolumes(claims, node, snapshot.volumes) : undefined);
    const name = node.metadata?.name ?? "";
    if (reason)
      for (const r of typeof reason === "string" ? [reason] : reason) reasons.set(r, (reasons.get(r) ?? 0) + 1);
    else fits.push({ name, pods: podsOnNode(snapshot, name).length });
  }
  if (fits.length > 0) {
    fits.sort((a, b) => a.pods - b.pods || a.name.localeCompare(b.name));
    const delayedClaims = claims?.delayed ?? [];
    return delayedClaims.length > 0 ? { nodeName: fits[0].name, delayedClaims } : { nodeName: fits[0].name };
  }
  const parts = [...reasons].sort(([a], [b]) => a.localeCompare(b)).map(([r, n]) => `${n} ${r}`);
  const detail = parts.length ? ` ${parts.join(", ")}.` : "";
  return { unschedulable: `0/${snapshot.nodes.length} nodes are available:${detail}` };
}
