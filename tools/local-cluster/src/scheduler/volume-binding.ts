/**
 * kube-scheduler's VolumeBinding plugin (pure), worded as it words its results:
 *
 *   PreFilter (the pod)  claim missing            -> `persistentvolumeclaim "x" not found` (no node can help)
 *                        claim being deleted      -> `persistentvolumeclaim "x" is being deleted`
 *                        unbound, not delayed     -> `pod has unbound immediate PersistentVolumeClaims`
 *                        unbound, WaitForFirstConsumer -> decided per node, bound at PreBind
 *   Filter (each node)   bound PV's node affinity excludes the node -> `node(s) had volume node affinity conflict`
 *                        bound to a PV that does not exist -> `node(s) unavailable due to one or more pvc(s) bound
 *                                                             to non-existent pv(s)`
 *                        delayed claim: no matching PV on the node and the class cannot provision
 *                                                          -> `node(s) didn't find available persistent volumes to bind`
 */
import type {
  V1Node,
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1Pod,
  V1StorageClass,
} from "../cluster/kube-models.ts";
import { classOf, findMatchingVolume, podClaimNames, volumeAllowsNode } from "../volumes/volume-match.ts";
import { nodeSelectorMatches } from "./selectors.ts";

/** The storage objects the scheduler watches. */
export interface VolumeSnapshot {
  readonly claims: readonly V1PersistentVolumeClaim[];
  readonly volumes: readonly V1PersistentVolume[];
  readonly classes: readonly V1StorageClass[];
}

/** A pod's claims sorted for the Filter phase. */
export interface PodClaims {
  /** Claims bound to a volume (the volume undefined when it does not exist). */
  readonly bound: readonly { claim: V1PersistentVolumeClaim; volume: V1PersistentVolume | undefined }[];
  /** Unbound claims of a WaitForFirstConsumer class: bound once the pod has a node. */
  readonly delayed: readonly V1PersistentVolumeClaim[];
}

const NO_PROVISIONER = "kubernetes.io/no-provisioner";

function classNamed(snapshot: VolumeSnapshot, name: string): V1StorageClass | undefined {
  return name ? snapshot.classes.find((c) => c.metadata?.name === name) : undefined;
}

/** PreFilter: the pod's claims, or the reason no node can take the pod. */
export function preFilterVolumes(pod: V1Pod, snapshot: VolumeSnapshot): PodClaims | { unresolvable: string } {
  const ns = pod.metadata?.namespace ?? "default";
  const bound: { claim: V1PersistentVolumeClaim; volume: V1PersistentVolume | undefined }[] = [];
  const delayed: V1PersistentVolumeClaim[] = [];
  let immediate = false;
  for (const name of podClaimNames(pod)) {
    const claim = snapshot.claims.find((c) => c.metadata?.namespace === ns && c.metadata?.name === name);
    if (!claim) return { unresolvable: `persistentvolumeclaim "${name}" not found` };
    if (claim.metadata?.deletionTimestamp) return { unresolvable: `persistentvolumeclaim "${name}" is being deleted` };
    const volumeName = claim.spec?.volumeName;
    if (volumeName) {
      bound.push({ claim, volume: snapshot.volumes.find((v) => v.metadata?.name === volumeName) });
    } else if (classNamed(snapshot, classOf(claim))?.volumeBindingMode === "WaitForFirstConsumer") {
      delayed.push(claim);
    } else {
      immediate = true;
    }
  }
  if (immediate) return { unresolvable: "pod has unbound immediate PersistentVolumeClaims" };
  return { bound, delayed };
}

function canProvisionOn(sc: V1StorageClass | undefined, node: V1Node): boolean {
  if (!sc || sc.provisioner === NO_PROVISIONER) return false;
  const topologies = sc.allowedTopologies ?? [];
  if (topologies.length === 0) return true;
  const terms = topologies.map((t) => ({
    matchExpressions: (t.matchLabelExpressions ?? []).map((e) => ({ key: e.key, operator: "In", values: e.values })),
  }));
  return nodeSelectorMatches(node, terms);
}

/** Filter: why `node` cannot serve the pod's claims, or undefined. */
export function checkVolumes(claims: PodClaims, node: V1Node, snapshot: VolumeSnapshot): string | undefined {
  for (const { volume } of claims.bound) {
    if (!volume) return "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";
    if (!volumeAllowsNode(volume, node)) return "node(s) had volume node affinity conflict";
  }
  for (const claim of claims.delayed) {
    if (findMatchingVolume(claim, snapshot.volumes, node)) continue;
    if (!canProvisionOn(classNamed(snapshot, classOf(claim)), node))
      return "node(s) didn't find available persistent volumes to bind";
  }
  return undefined;
}
