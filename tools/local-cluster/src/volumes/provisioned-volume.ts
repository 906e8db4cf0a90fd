/**
 * What every in-process provisioner's PersistentVolume has in common (pure), after external-provisioner: the PV is
 * named after the claim, pre-bound to it, and carries the claim's request and access modes and the class's reclaim
 * policy; only its source, volumeMode and node affinity are the provisioner's own (local-path.ts, local-block.ts).
 *
 *   claim ns/name (uid U) of class C  -> PV pvc-U, annotated pv.kubernetes.io/provisioned-by = <provisioner>,
 *                                        capacity = the request, accessModes = the claim's, reclaim = C's,
 *                                        storageClassName C, <source>, claimRef = the claim, <nodeAffinity>
 *   its storage on the node           -> <baseDir>/pvc-U_ns_name (Rancher's folder name)
 */
import { join } from "node:path";
import type { V1Node, V1PersistentVolume, V1PersistentVolumeClaim, V1StorageClass } from "../cluster/kube-models.ts";
import { ANN } from "./volume-match.ts";

type PersistentVolumeSpec = NonNullable<V1PersistentVolume["spec"]>;

/** The node label a local volume's node affinity names. */
const HOSTNAME_LABEL = "kubernetes.io/hostname";

/** The PV name for a claim (external-provisioner's `pvc-<claim uid>`). */
export function volumeNameFor(claim: V1PersistentVolumeClaim): string {
  return `pvc-${claim.metadata?.uid ?? ""}`;
}

/** Where the claim's storage lives: `<baseDir>/<pv>_<namespace>_<claim>` (Rancher's folder name). */
export function volumePathFor(baseDir: string, claim: V1PersistentVolumeClaim): string {
  return join(baseDir, `${volumeNameFor(claim)}_${claim.metadata?.namespace ?? ""}_${claim.metadata?.name ?? ""}`);
}

/** True when the claim needs storage every node sees (no single-node affinity). */
export function isShared(claim: V1PersistentVolumeClaim): boolean {
  const modes = claim.spec?.accessModes ?? [];
  return modes.includes("ReadWriteMany") || modes.includes("ReadOnlyMany");
}

/** The `kubernetes.io/hostname` of `node` (its name when unlabelled); "" for no node. */
export function hostnameOf(node: V1Node | undefined): string {
  return node ? (node.metadata?.labels?.[HOSTNAME_LABEL] ?? node.metadata?.name ?? "") : "";
}

/**
 * A local volume's node affinity: to the node named `hostname` (`kubernetes.io/hostname In [hostname]`), or, for
 * "", to every node (`Exists`: each node of the local cluster is this one machine).
 */
export function hostnameAffinity(hostname: string): NonNullable<PersistentVolumeSpec["nodeAffinity"]> {
  const term = hostname
    ? { key: HOSTNAME_LABEL, operator: "In", values: [hostname] }
    : { key: HOSTNAME_LABEL, operator: "Exists" };
  return { required: { nodeSelectorTerms: [{ matchExpressions: [term] }] } };
}

/** What a provisioner decides about its PV; the rest comes from the claim and the class. */
export interface VolumeParts {
  /** The provisioner's name, recorded in `pv.kubernetes.io/provisioned-by`. */
  readonly provisioner: string;
  readonly volumeMode: string;
  /** The volume source (and anything that goes with it, e.g. `mountOptions`), placed after `storageClassName`. */
  readonly source: Partial<PersistentVolumeSpec>;
  /** Omitted: the volume has no node affinity. */
  readonly nodeAffinity?: PersistentVolumeSpec["nodeAffinity"];
}

/** The PV `parts.provisioner` makes for `claim` of class `sc`, pre-bound to the claim. */
export function provisionedVolume(
  claim: V1PersistentVolumeClaim,
  sc: V1StorageClass,
  parts: VolumeParts,
): V1PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: {
      name: volumeNameFor(claim),
      annotations: { [ANN.provisionedBy]: parts.provisioner },
      labels: {},
    },
    spec: {
      capacity: { storage: claim.spec?.resources?.requests?.storage ?? "0" },
      accessModes: claim.spec?.accessModes,
      volumeMode: parts.volumeMode,
      persistentVolumeReclaimPolicy: sc.reclaimPolicy ?? "Delete",
      storageClassName: sc.metadata?.name,
      ...parts.source,
      claimRef: {
        apiVersion: "v1",
        kind: "PersistentVolumeClaim",
        namespace: claim.metadata?.namespace,
        name: claim.metadata?.name,
        uid: claim.metadata?.uid,
        resourceVersion: claim.metadata?.resourceVersion,
      },
      ...(parts.nodeAffinity ? { nodeAffinity: parts.nodeAffinity } : {}),
    },
  };
}
