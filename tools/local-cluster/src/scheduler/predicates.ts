/**
 * Scheduling predicates (pure): can `pod` run on `node`, given the pods already there? Each predicate returns the
 * reason a node is filtered out, worded as kube-scheduler words it, or undefined when the node passes.
 *
 *   unschedulable -> taints/tolerations -> nodeSelector + required node affinity -> resources -> pod (anti-)affinity
 */
import type { V1Node, V1Pod, V1PodAffinityTerm, V1Taint, V1Toleration } from "../cluster/kube-models.ts";
import { labelSelectorMatches, nodeSelectorMatches } from "./selectors.ts";
import type { VolumeSnapshot } from "./volume-binding.ts";

/** Parses a resource quantity to a number in base units (cpu in cores, memory in bytes). */
export type QuantityParser = (quantity: string) => number;

/** Everything the predicates look at. */
export interface ClusterSnapshot {
  readonly nodes: readonly V1Node[];
  /** Pods bound to a node and not finished (they hold resources). */
  readonly boundPods: readonly V1Pod[];
  /**
   * `boundPods` by node name ({@link indexByNode}), built once per scheduling pass: without it each decision
   * rescans every bound pod for every node, which at 10,000 pods on 100 nodes bound a few pods per second.
   */
  readonly podsByNode?: ReadonlyMap<string, readonly V1Pod[]>;
  /** Claims, volumes and classes, for the pods' PersistentVolumeClaims (volume-binding.ts); absent: not checked. */
  readonly volumes?: VolumeSnapshot;
}

function tolerates(tolerations: readonly V1Toleration[], taint: V1Taint): boolean {
  return tolerations.some((t) => {
    if (t.effect && t.effect !== taint.effect) return false;
    if (!t.key) return t.operator === "Exists";
    if (t.key !== taint.key) return false;
    return t.operator === "Exists" || (t.value ?? "") === (taint.value ?? "");
  });
}

/** `node(s) were unschedulable` unless the pod tolerates node.kubernetes.io/unschedulable. */
export function checkUnschedulable(pod: V1Pod, node: V1Node): string | undefined {
  if (!node.spec?.unschedulable) return undefined;
  const taint: V1Taint = { key: "node.kubernetes.io/unschedulable", effect: "NoSchedule" };
  return tolerates(pod.spec?.tolerations ?? [], taint) ? undefined : "node(s) were unschedulable";
}

/** `node(s) had untolerated taint {k: v}` for the first NoSchedule/NoExecute taint the pod does not tolerate. */
export function checkTaints(pod: V1Pod, node: V1Node): string | undefined {
  for (const taint of node.spec?.taints ?? []) {
    if (taint.effect === "PreferNoSchedule") continue;
    if (!tolerates(pod.spec?.tolerations ?? [], taint))
      return `node(s) had untolerated taint {${taint.key}: ${taint.value ?? ""}}`;
  }
  return undefined;
}

/** nodeSelector and requiredDuringSchedulingIgnoredDuringExecution node affinity. */
export function checkNodeAffinity(pod: V1Pod, node: V1Node): string | undefined {
  const labels = node.metadata?.labels ?? {};
  for (const [k, v] of Object.entries(pod.spec?.nodeSelector ?? {})) {
    if (labels[k] !== v) return "node(s) didn't match Pod's node affinity/selector";
  }
  const required = pod.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution;
  if (required && !nodeSelectorMatches(node, required.nodeSelectorTerms))
    return "node(s) didn't match Pod's node affinity/selector";
  return undefined;
}

/** `pods` by the node they are bound to. */
export function indexByNode(pods: readonly V1Pod[]): Map<string, V1Pod[]> {
  const byNode = new Map<string, V1Pod[]>();
  for (const p of pods) {
    const name = p.spec?.nodeName;
    if (!name) continue;
    const list = byNode.get(name);
    if (list) list.push(p);
    else byNode.set(name, [p]);
  }
  return byNode;
}

/** The bound pods on node `name`. */
export function podsOnNode(snapshot: ClusterSnapshot, name: string | undefined): readonly V1Pod[] {
  if (snapshot.podsByNode) return snapshot.podsByNode.get(name ?? "") ?? [];
  return snapshot.boundPods.filter((p) => p.spec?.nodeName === name);
}

/** Each pod's requests, once per pod object and parser (pods from a cache are not modified, only replaced). */
const requestsMemo = new WeakMap<QuantityParser, WeakMap<V1Pod, Map<string, number>>>();

function podRequests(pod: V1Pod, parse: QuantityParser): Map<string, number> {
  let byPod = requestsMemo.get(parse);
  if (!byPod) {
    byPod = new WeakMap();
    requestsMemo.set(parse, byPod);
  }
  const known = byPod.get(pod);
  if (known) return known;
  const total = new Map<string, number>();
  byPod.set(pod, total);
  for (const c of pod.spec?.containers ?? []) {
    const req = { ...c.resources?.limits, ...c.resources?.requests };
    // Extended resources (devices.kubevirt.io/kvm) are requested through limits; requests default to limits.
    for (const [name, q] of Object.entries(req)) total.set(name, (total.get(name) ?? 0) + parse(String(q)));
  }
  return total;
}

/**
 * `Too many pods`, or `Insufficient <resource>` for each resource the node's allocatable cannot hold (NodeResourcesFit
 * reports every one: `2 Insufficient devices.kubevirt.io/kvm, 2 Insufficient devices.kubevirt.io/vhost-net`).
 */
export function checkResources(
  pod: V1Pod,
  node: V1Node,
  podsOnNode: readonly V1Pod[],
  parse: QuantityParser,
): string[] | undefined {
  const allocatable = node.status?.allocatable ?? {};
  const maxPods = allocatable.pods ? parse(allocatable.pods) : 110;
  if (podsOnNode.length + 1 > maxPods) return ["Too many pods"];
  const used = new Map<string, number>();
  for (const p of podsOnNode) for (const [k, v] of podRequests(p, parse)) used.set(k, (used.get(k) ?? 0) + v);
  const insufficient: string[] = [];
  for (const [name, want] of podRequests(pod, parse)) {
    if (want === 0) continue;
    const have = allocatable[name] !== undefined ? parse(allocatable[name]) : 0;
    if ((used.get(name) ?? 0) + want > have) insufficient.push(`Insufficient ${name}`);
  }
  return insufficient.length > 0 ? insufficient : undefined;
}

function termMatchesPodOnNode(pod: V1Pod, term: V1PodAffinityTerm, node: V1Node, snapshot: ClusterSnapshot): boolean {
  const topologyValue = node.metadata?.labels?.[term.topologyKey];
  if (topologyValue === undefined) return false;
  const namespaces = term.namespaces?.length ? term.namespaces : [pod.metadata?.namespace ?? "default"];
  const nodesInDomain = new Set(
    snapshot.nodes.filter((n) => n.metadata?.labels?.[term.topologyKey] === topologyValue).map((n) => n.metadata?.name),
  );
  return snapshot.boundPods.some(
    (other) =>
      other.metadata?.uid !== pod.metadata?.uid &&
      nodesInDomain.has(other.spec?.nodeName) &&
      (term.namespaceSelector ? true : namespaces.includes(other.metadata?.namespace ?? "default")) &&
      labelSelectorMatches(term.labelSelector, other.metadata?.labels),
  );
}

/** Required inter-pod affinity and anti-affinity (the hostname anti-affinity migration target pods carry). */
export function checkPodAffinity(pod: V1Pod, node: V1Node, snapshot: ClusterSnapshot): string | undefined {
  const anti = pod.spec?.affinity?.podAntiAffinity?.requiredDuringSchedulingIgnoredDuringExecution ?? [];
  if (anti.some((t) => termMatchesPodOnNode(pod, t, node, snapshot)))
    return "node(s) didn't match pod anti-affinity rules";
  const aff = pod.spec?.affinity?.podAffinity?.requiredDuringSchedulingIgnoredDuringExecution ?? [];
  if (aff.some((t) => !termMatchesPodOnNode(pod, t, node, snapshot))) return "node(s) didn't match pod affinity rules";
  return undefined;
}

/** The reasons of the first filter that rejects `node` for `pod` (most filters give one), or undefined when it fits. */
export function filterNode(
  pod: V1Pod,
  node: V1Node,
  snapshot: ClusterSnapshot,
  parse: QuantityParser,
): string | readonly string[] | undefined {
  return (
    checkUnschedulable(pod, node) ??
    checkTaints(pod, node) ??
    checkNodeAffinity(pod, node) ??
    checkResources(pod, node, podsOnNode(snapshot, node.metadata?.name), parse) ??
    checkPodAffinity(pod, node, snapshot)
  );
}
