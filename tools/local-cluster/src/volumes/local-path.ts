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
import { join } from "node:path";
import type { V1Node, V1PersistentVolume, V1PersistentVolumeClaim, V1StorageClass } from "../cluster/kube-models.ts";
import { ANN } from "./volume-match.ts";

/** The provisioner name, as Rancher's. */
export const LOCAL_PATH_PROVISIONER = "rancher.io/local-path";
/** The default class's name, as Rancher's deployment (and kind, k3s) name it. */
export const LOCAL_PATH_CLASS = "local-path";
const HOSTNAME_LABEL = "kubernetes.io/hostname";

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

/** The PV name for a claim (external-provisioner's `pvc-<claim uid>`). */
export function volumeNameFor(claim: V1PersistentVolumeClaim): string {
  return `pvc-${claim.metadata?.uid ?? ""}`;
}

/** The directory backing the claim's volume: `<baseDir>/<pv>_<namespace>_<claim>` (Rancher's folder name). */
export function volumeDirFor(baseDir: string, claim: V1PersistentVolumeClaim): string {
  return join(baseDir, `${volumeNameFor(claim)}_${claim.metadata?.namespace ?? ""}_${claim.metadata?.name ?? ""}`);
}

/** True when the claim needs a directory every node sees (no node affinity). */
export function isShared(claim: V1PersistentVolumeClaim): boolean {
  const modes = claim.spec?.accessModes ?? [];
  return modes.includes("ReadWriteMany") || modes.includes("ReadOnlyMany");
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
  const shared = isShared(claim);
  const hostname = node ? (node.metadata?.labels?.[HOSTNAME_LABEL] ?? node.metadata?.name ?? "") : "";
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: {
      name: volumeNameFor(claim),
      annotations: { [ANN.provisionedBy]: LOCAL_PATH_PROVISIONER },
      labels: {},
    },
    spec: {
      capacity: { storage: claim.spec?.resources?.requests?.storage ?? "0" },
      accessModes: claim.spec?.accessModes,
      volumeMode: claim.spec?.volumeMode ?? "Filesystem",
      persistentVolumeReclaimPolicy: sc.reclaimPolicy ?? "Delete",
      storageClassName: sc.metadata?.name,
      ...(sc.mountOptions ? { mountOptions: sc.mountOptions } : {}),
      hostPath: { path: volumeDirFor(baseDir, claim), type: "DirectoryOrCreate" },
      claimRef: {
        apiVersion: "v1",
        kind: "PersistentVolumeClaim",
        namespace: claim.metadata?.namespace,
        name: claim.metadata?.name,
        uid: claim.metadata?.uid,
        resourceVersion: claim.metadata?.resourceVersion,
      },
      ...(!shared && hostname
        ? {
            nodeAffinity: {
              required: {
                nodeSelectorTerms: [
                  { matchExpressions: [{ key: HOSTNAME_LABEL, operator: "In", values: [hostname] }] },
                ],
              },
            },
          }
        : {}),
    },
  };
}
