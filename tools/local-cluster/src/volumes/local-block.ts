/**
 * The local-block provisioner's decisions (pure): its StorageClass and the PersistentVolume it makes for a Block
 * claim. The default class (local-path, Rancher's provisioner) refuses Block claims as Rancher's does; raw block
 * volumes come from this second class, as on clusters where a block-capable provisioner sits beside local-path.
 *
 *   claim ns/name (uid U, volumeMode Block), node N
 *     backing file   <baseDir>/pvc-U_ns_name.img     sparse, the request rounded up to 512-byte sectors
 *     device         a loop device over it (loop-devices.ts), reached through the stable link
 *     link           <baseDir>/pvc-U_ns_name  ->  /dev/loopK  (made again when the device changes, e.g. after a
 *                    restart; the PV never changes: a PV's source is immutable)
 *     PV pvc-U       volumeMode Block, local.path = the link (the local volume plugin follows it, as it follows the
 *                    by-id links of sig-storage-local-static-provisioner), capacity = the request, the claim's access
 *                    modes, claimRef, the class's reclaim policy, node affinity kubernetes.io/hostname In [N]; for
 *                    ReadWriteMany/ReadOnlyMany: kubernetes.io/hostname Exists (every node is this one machine;
 *                    a local PV must carry node affinity)
 */
import { tryParseQuantity } from "@kvt/api";
import type { V1Node, V1PersistentVolume, V1PersistentVolumeClaim, V1StorageClass } from "../cluster/kube-models.ts";
import { hostnameAffinity, hostnameOf, isShared, provisionedVolume, volumePathFor } from "./provisioned-volume.ts";

/** The provisioner name. */
export const LOCAL_BLOCK_PROVISIONER = "kubevirt-ts.io/local-block";
/** The class's name. */
export const LOCAL_BLOCK_CLASS = "local-block";
const SECTOR = 512n;

/** The StorageClass for raw block volumes the local cluster creates when it starts (not the default). */
export function localBlockStorageClass(): V1StorageClass {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: { name: LOCAL_BLOCK_CLASS },
    provisioner: LOCAL_BLOCK_PROVISIONER,
    reclaimPolicy: "Delete",
    volumeBindingMode: "WaitForFirstConsumer",
  };
}

/** The stable path of the claim's device (a link to its loop device): `<baseDir>/<pv>_<namespace>_<claim>`. */
export function deviceLinkFor(baseDir: string, claim: V1PersistentVolumeClaim): string {
  return volumePathFor(baseDir, claim);
}

/** The sparse file behind a device link. */
export function backingFileOf(link: string): string {
  return `${link}.img`;
}

/** The bytes of the claim's device: its storage request rounded up to whole 512-byte sectors. */
export function deviceBytes(claim: V1PersistentVolumeClaim): bigint {
  const bytes = tryParseQuantity(claim.spec?.resources?.requests?.storage)?.value() ?? 0n;
  return ((bytes + SECTOR - 1n) / SECTOR) * SECTOR;
}

/** Why the local-block provisioner refuses `claim` (it makes raw block volumes only), or undefined for a Block claim. */
export function localBlockRefusal(claim: V1PersistentVolumeClaim): string | undefined {
  const mode = claim.spec?.volumeMode ?? "Filesystem";
  if (mode === "Block") return undefined;
  return `${LOCAL_BLOCK_PROVISIONER} provisions volumeMode Block only, not ${mode}: use a filesystem class (local-path)`;
}

/** The PV for Block `claim` of class `sc`, provisioned for `node` (undefined only for shared claims). */
export function localBlockVolume(
  claim: V1PersistentVolumeClaim,
  sc: V1StorageClass,
  baseDir: string,
  node: V1Node | undefined,
): V1PersistentVolume {
  // A local PV must carry node affinity: a shared claim's (or one with no node) is to every node.
  const hostname = isShared(claim) ? "" : hostnameOf(node);
  return provisionedVolume(claim, sc, {
    provisioner: LOCAL_BLOCK_PROVISIONER,
    volumeMode: "Block",
    source: { local: { path: deviceLinkFor(baseDir, claim) } },
    nodeAffinity: hostnameAffinity(hostname),
  });
}
