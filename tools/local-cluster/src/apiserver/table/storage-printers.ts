/**
 * Server-side columns of the storage kinds as kube-apiserver prints them (pkg/printers/internalversion
 * printPersistentVolume, printPersistentVolumeClaim, printStorageClass), so `kubectl get pv,pvc,sc` reads the same
 * as on a real cluster. Every column list starts after Name.
 */
import { tryParseQuantity } from "@kvt/api";
import type { PrinterColumn } from "../resources/types.ts";
import { isObject, type Json, type KubeObject } from "../types.ts";
import { ageOf } from "./duration.ts";

type O = Record<string, unknown>;
const obj = (v: unknown): O => (isObject(v) ? v : {});
const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);

function col(name: string, render: (o: KubeObject, now: number) => Json, priority = 0): PrinterColumn {
  return { name, type: "string", description: name, priority, render };
}

const AGE = col("Age", (o, now) => ageOf(o.metadata.creationTimestamp, now));

/** The annotation that makes a StorageClass the default one (and its pre-1.13 beta spelling). */
export const DEFAULT_CLASS_ANNOTATIONS = [
  "storageclass.kubernetes.io/is-default-class",
  "storageclass.beta.kubernetes.io/is-default-class",
] as const;

/** True when `sc` is marked as the cluster's default class. */
export function isDefaultClass(sc: KubeObject): boolean {
  return DEFAULT_CLASS_ANNOTATIONS.some((a) => sc.metadata.annotations?.[a] === "true");
}

/** `RWO,ROX,RWX,RWOP` in Kubernetes' fixed order (helper.GetAccessModesAsString). */
export function accessModesString(modes: unknown): string {
  const list = Array.isArray(modes) ? modes : [];
  const short: [string, string][] = [
    ["ReadWriteOnce", "RWO"],
    ["ReadOnlyMany", "ROX"],
    ["ReadWriteMany", "RWX"],
    ["ReadWriteOncePod", "RWOP"],
  ];
  return short
    .filter(([m]) => list.includes(m))
    .map(([, s]) => s)
    .join(",");
}

/** The class of a PV or PVC: the beta annotation wins over spec.storageClassName (helper.GetPersistent*Class). */
function classOf(o: KubeObject): string {
  return o.metadata.annotations?.["volume.beta.kubernetes.io/storage-class"] ?? str(obj(o.spec).storageClassName) ?? "";
}

/** A quantity as Kubernetes prints it (canonical: `1Gi`, not `1024Mi`). */
function quantity(v: unknown): string {
  if (v === undefined) return "";
  return tryParseQuantity(v)?.toString() ?? (typeof v === "string" ? v : "");
}

const attributesClass = (o: KubeObject): string => str(obj(o.spec).volumeAttributesClassName) ?? "<unset>";
const volumeMode = (o: KubeObject): string => str(obj(o.spec).volumeMode) ?? "<unset>";

const PERSISTENT_VOLUME: PrinterColumn[] = [
  col("Capacity", (o) => quantity(obj(obj(o.spec).capacity).storage)),
  col("Access Modes", (o) => accessModesString(obj(o.spec).accessModes)),
  col("Reclaim Policy", (o) => str(obj(o.spec).persistentVolumeReclaimPolicy) ?? ""),
  col("Status", (o) => (o.metadata.deletionTimestamp ? "Terminating" : (str(obj(o.status).phase) ?? ""))),
  col("Claim", (o) => {
    const ref = obj(obj(o.spec).claimRef);
    return str(ref.name) ? `${str(ref.namespace) ?? ""}/${str(ref.name) ?? ""}` : "";
  }),
  col("StorageClass", classOf),
  col("VolumeAttributesClass", attributesClass),
  col("Reason", (o) => str(obj(o.status).reason) ?? ""),
  AGE,
  col("VolumeMode", volumeMode, 1),
];

const PERSISTENT_VOLUME_CLAIM: PrinterColumn[] = [
  col("Status", (o) => (o.metadata.deletionTimestamp ? "Terminating" : (str(obj(o.status).phase) ?? ""))),
  col("Volume", (o) => str(obj(o.spec).volumeName) ?? ""),
  // Capacity and access modes are the bound volume's, so they stay blank until the claim is bound.
  col("Capacity", (o) => (str(obj(o.spec).volumeName) ? quantity(obj(obj(o.status).capacity).storage) : "")),
  col("Access Modes", (o) => (str(obj(o.spec).volumeName) ? accessModesString(obj(o.status).accessModes) : "")),
  col("StorageClass", classOf),
  col("VolumeAttributesClass", attributesClass),
  AGE,
  col("VolumeMode", volumeMode, 1),
];

const STORAGE_CLASS: PrinterColumn[] = [
  col("Provisioner", (o) => str(o.provisioner) ?? ""),
  col("ReclaimPolicy", (o) => str(o.reclaimPolicy) ?? "Delete"),
  col("VolumeBindingMode", (o) => str(o.volumeBindingMode) ?? "Immediate"),
  col("AllowVolumeExpansion", (o) => String(o.allowVolumeExpansion === true)),
  AGE,
];

/** Storage columns by `group/resource`. */
export const STORAGE_COLUMNS: ReadonlyArray<readonly [string, readonly PrinterColumn[]]> = [
  ["core/persistentvolumes", PERSISTENT_VOLUME],
  ["core/persistentvolumeclaims", PERSISTENT_VOLUME_CLAIM],
  ["storage.k8s.io/storageclasses", STORAGE_CLASS],
];

/** The Name cell of a StorageClass: `local-path (default)` for the default class, as kubectl shows it. */
export function storageClassName(o: KubeObject): string {
  const name = o.metadata.name ?? "";
  return isDefaultClass(o) ? `${name} (default)` : name;
}
