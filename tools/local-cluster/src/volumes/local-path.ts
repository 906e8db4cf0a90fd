/**
 * The local-path provisioner's decisions (pure), after Rancher's local-path-provisioner: the default StorageClass,
 * and the PersistentVolume it makes for a claim.
 *
 *   claim ns/name (uid U), node N    -> PV pvc-U: hostPath <baseDir>/pvc-U_ns_name (DirectoryOrCreate),
 *                                       capacity = the request, the claim's access modes and volumeMode,
 *                                       claimRef = the claim, reclaim policy = the class's,
 *                                       nodeAffinity kubernetes.io/hostname In [N] (none for ReadWriteMany:
 *                                       every node of this one machine sees the directory)
 */
import type { V1Node, V1PersistentVolume, V1PersistentVolumeClaim, V1StorageClass } from "../cluster/kube-models.ts";
import { hostnameAffinity, hostnameOf, isShared, provisionedVolume, volumePathFor } from "./provisioned-volume.ts";

/** The provisioner name, as Rancher's. */
export const LOCAL_PATH_PROVISIONER = "rancher.io/local-path";
/** The default class's name, as Rancher's deployment (and kind, k3s) name it. */
export const LOCAL_PATH_CLASS = "local-path";

/** The default StorageClass the local cluster creates when it starts. */
export function localPathStorageClass(): V1StorageClass {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: {
      name: LOCAL_PATH_CLASS,
      annotations: { "storageclass.kubernetes.io/is-default-class": "true" },
    },
    provisioner: LOCAL_PATH_PROVISIONER,
    reclaimPolicy: "Delete",
    volumeBindingMode: "WaitForFirstConsumer",
  };
}

/** The directory backing the claim's volume: `<baseDir>/<pv>_<namespace>_<claim>` (Rancher's folder name). */
export function volumeDirFor(baseDir: string, claim: V1PersistentVolumeClaim): string {
  return volumePathFor(baseDir, claim);
}

/**
 * The PV for `claim` of class `sc`, provisioned for `node` (the scheduler's selected node; undefined for shared
 * claims or Immediate binding of shared claims).
 */
export function localPathVolume(
  claim: V1PersistentVolumeClaim,
  sc: V1StorageClass,
  baseDir: string,
  node: V1Node | undefined,
): V1PersistentVolume {
  // A shared claim's directory is seen by every node: no node affinity at all.
  const hostname = isShared(claim) ? "" : hostnameOf(node);
  return provisionedVolume(claim, sc, {
    provisioner: LOCAL_PATH_PROVISIONER,
    volumeMode: claim.spec?.volumeMode ?? "Filesystem",
    source: {
      ...(sc.mountOptions ? { mountOptions: sc.mountOptions } : {}),
      hostPath: { path: volumeDirFor(baseDir, claim), type: "DirectoryOrCreate" },
    },
    ...(hostname ? { nodeAffinity: hostnameAffinity(hostname) } : {}),
  });
}
