/**
 * Claim-to-volume matching (pure), as kube-controller-manager's PersistentVolume controller and kube-scheduler's
 * VolumeBinding plugin decide it (pkg/controller/volume/persistentvolume/util FindMatchingVolume):
 *
 *   volume pre-bound to the claim (claimRef)          -> that one, if it fits
 *   else Available, unbound, same class, same volumeMode,
 *        access modes a superset, capacity >= request,
 *        claim's selector matches, node affinity allows -> the smallest such volume
 */

import { tryParseQuantity } from "@kvt/api";
import type { V1Node, V1PersistentVolume, V1PersistentVolumeClaim } from "../cluster/kube-models.ts";
import { labelSelectorMatches, nodeSelectorMatches } from "../scheduler/selectors.ts";

/** Annotations the binder, the scheduler and provisioners exchange (k8s.io/component-helpers storage/volume). */
export const ANN = {
  bindCompleted: "pv.kubernetes.io/bind-completed",
  boundByController: "pv.kubernetes.io/bound-by-controller",
  provisionedBy: "pv.kubernetes.io/provisioned-by",
  selectedNode: "volume.kubernetes.io/selected-node",
  storageProvisioner: "volume.kubernetes.io/storage-provisioner",
  betaStorageProvisioner: "volume.beta.kubernetes.io/storage-provisioner",
  betaStorageClass: "volume.beta.kubernetes.io/storage-class",
} as const;

/** The class a claim or volume asks for: the beta annotation, else spec.storageClassName, else "" (no class). */
export function classOf(o: V1PersistentVolumeClaim | V1PersistentVolume): string {
  return o.metadata?.annotations?.[ANN.betaStorageClass] ?? o.spec?.storageClassName ?? "";
}

/** Bytes of a storage quantity (0 when absent or unparsable). */
export function storageBytes(quantity: unknown): number {
  return tryParseQuantity(quantity)?.toNumber() ?? 0;
}

/** The claim's storage request in bytes. */
export function requestBytes(claim: V1PersistentVolumeClaim): number {
  return storageBytes(claim.spec?.resources?.requests?.storage);
}

/** True when `volume` offers every access mode `claim` asks for. */
export function accessModesCover(volume: V1PersistentVolume, claim: V1PersistentVolumeClaim): boolean {
  const offered = volume.spec?.accessModes ?? [];
  return (claim.spec?.accessModes ?? []).every((m) => offered.includes(m));
}

/** True when the volume's node affinity (if any) allows `node`. */
export function volumeAllowsNode(volume: V1PersistentVolume, node: V1Node): boolean {
  const terms = volume.spec?.nodeAffinity?.required?.nodeSelectorTerms;
  return !terms || nodeSelectorMatches(node, terms);
}

/** True when `volume` is pre-bound to `claim` (claimRef names it, and the uid if set). */
export function preBoundTo(volume: V1PersistentVolume, claim: V1PersistentVolumeClaim): boolean {
  const ref = volume.spec?.claimRef;
  if (!ref?.name) return false;
  return (
    ref.name === claim.metadata?.name &&
    (ref.namespace ?? "") === (claim.metadata?.namespace ?? "") &&
    (!ref.uid || ref.uid === claim.metadata?.uid)
  );
}

/** Why `volume` cannot serve `claim` (on `node`, when given), or undefined when it can. */
export function volumeMismatch(
  volume: V1PersistentVolume,
  claim: V1PersistentVolumeClaim,
  node?: V1Node,
): string | undefined {
  if (volume.metadata?.deletionTimestamp) return "volume is being deleted";
  if (volume.spec?.claimRef?.name && !preBoundTo(volume, claim)) return "volume is bound to another claim";
  if (!volume.spec?.claimRef?.name && volume.status?.phase !== "Available") return "volume is not Available";
  if (classOf(volume) !== classOf(claim)) return "storage class differs";
  if ((volume.spec?.volumeMode ?? "Filesystem") !== (claim.spec?.volumeMode ?? "Filesystem"))
    return "volume mode differs";
  if (!accessModesCover(volume, claim)) return "access modes not offered";
  if (storageBytes(volume.spec?.capacity?.storage) < requestBytes(claim)) return "capacity too small";
  const selector = claim.spec?.selector;
  if (selector && !labelSelectorMatches(selector, volume.metadata?.labels)) return "selector does not match";
  if (node && !volumeAllowsNode(volume, node)) return "node affinity conflict";
  return undefined;
}

/**
 * Why the volume a claim names in spec.volumeName cannot serve it, in kube-controller-manager's words
 * (checkVolumeSatisfyClaim: the event VolumeMismatch "Cannot bind to requested volume ...: <this>"), or undefined.
 */
export function requestedVolumeMismatch(
  volume: V1PersistentVolume,
  claim: V1PersistentVolumeClaim,
): string | undefined {
  if (volume.metadata?.deletionTimestamp) return `the volume is marked for deletion "${volume.metadata.name ?? ""}"`;
  if (storageBytes(volume.spec?.capacity?.storage) < requestBytes(claim)) return "requested PV is too small";
  if (classOf(volume) !== classOf(claim)) return "storageClassName does not match";
  if ((volume.spec?.volumeMode ?? "Filesystem") !== (claim.spec?.volumeMode ?? "Filesystem"))
    return "incompatible volumeMode";
  if (!accessModesCover(volume, claim)) return "incompatible accessMode";
  return undefined;
}

/**
 * The volume `claim` should bind to: one pre-bound to it, else the smallest matching Available volume. `node`
 * restricts the choice to volumes that node can reach (delayed binding with a selected node).
 */
export function findMatchingVolume(
  claim: V1PersistentVolumeClaim,
  volumes: readonly V1PersistentVolume[],
  node?: V1Node,
): V1PersistentVolume | undefined {
  const fits = volumes.filter((v) => volumeMismatch(v, claim, node) === undefined);
  const preBound = fits.find((v) => preBoundTo(v, claim));
  if (preBound) return preBound;
  return fits
    .filter((v) => !v.spec?.claimRef?.name)
    .sort(
      (a, b) =>
        storageBytes(a.spec?.capacity?.storage) - storageBytes(b.spec?.capacity?.storage) ||
        String(a.metadata?.name).localeCompare(String(b.metadata?.name)),
    )[0];
}

/** The names of the PersistentVolumeClaims a pod's volumes use (ephemeral volumes aside). */
export function podClaimNames(pod: {
  spec?: { volumes?: { persistentVolumeClaim?: { claimName: string } }[] };
}): string[] {
  return (pod.spec?.volumes ?? []).flatMap((v) => (v.persistentVolumeClaim ? [v.persistentVolumeClaim.claimName] : []));
}
