/**
 * Strategies of the storage kinds (PersistentVolumeClaim, PersistentVolume, storage.k8s.io StorageClass): the
 * defaults kube-apiserver applies on create and the validation it runs, with its field paths and messages
 * (k8s.io/kubernetes pkg/apis/core/validation ValidatePersistentVolume*, pkg/apis/storage/validation), so bad input
 * is refused with a Status listing the causes and never stored.
 */
import { tryParseQuantity } from "@kvt/api";
import type { StatusCause } from "../errors.ts";
import { isObject, jsonEqual, type KubeObject } from "../types.ts";
import type { Strategy } from "./types.ts";

type O = Record<string, unknown>;
const obj = (v: unknown): O => (isObject(v) ? v : {});

/** The access modes Kubernetes knows, in the order its messages list them. */
export const ACCESS_MODES = ["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"] as const;
const VOLUME_MODES = ["Block", "Filesystem"];
const PV_RECLAIM_POLICIES = ["Delete", "Recycle", "Retain"];
const SC_RECLAIM_POLICIES = ["Delete", "Retain"];
const BINDING_MODES = ["Immediate", "WaitForFirstConsumer"];
const HOST_PATH_TYPES = [
  "",
  "BlockDevice",
  "CharDevice",
  "Directory",
  "DirectoryOrCreate",
  "File",
  "FileOrCreate",
  "Socket",
];
/** PersistentVolume sources (one, and only one, per PV). */
const PV_SOURCES = [
  "awsElasticBlockStore",
  "azureDisk",
  "azureFile",
  "cephfs",
  "cinder",
  "csi",
  "fc",
  "flexVolume",
  "flocker",
  "gcePersistentDisk",
  "glusterfs",
  "hostPath",
  "iscsi",
  "local",
  "nfs",
  "photonPersistentDisk",
  "portworxVolume",
  "quobyte",
  "rbd",
  "scaleIO",
  "storageos",
  "vsphereVolume",
];

const quote = (v: unknown): string => (typeof v === "string" ? JSON.stringify(v) : String(v));
const required = (field: string, detail?: string): StatusCause => ({
  reason: "FieldValueRequired",
  field,
  message: detail ? `Required value: ${detail}` : "Required value",
});
const invalidValue = (field: string, value: unknown, detail: string): StatusCause => ({
  reason: "FieldValueInvalid",
  field,
  message: `Invalid value: ${quote(value)}: ${detail}`,
});
const notSupported = (field: string, value: unknown, supported: readonly string[]): StatusCause => ({
  reason: "FieldValueNotSupported",
  field,
  message: `Unsupported value: ${quote(value)}: supported values: ${supported.map((s) => JSON.stringify(s)).join(", ")}`,
});
const forbiddenField = (field: string, detail: string): StatusCause => ({
  reason: "FieldValueForbidden",
  field,
  message: `Forbidden: ${detail}`,
});

function oneOf(field: string, value: unknown, supported: readonly string[]): StatusCause[] {
  return value === undefined || supported.includes(value as string) ? [] : [notSupported(field, value, supported)];
}

function validateAccessModes(field: string, modes: unknown, requiredDetail?: string): StatusCause[] {
  const list = Array.isArray(modes) ? modes : [];
  if (list.length === 0) return [required(field, requiredDetail)];
  const out: StatusCause[] = [];
  for (const m of list) out.push(...oneOf(field, m, ACCESS_MODES));
  if (list.includes("ReadWriteOncePod") && list.length > 1)
    out.push(forbiddenField(field, "may not use ReadWriteOncePod with other access modes"));
  return out;
}

function validateStorageQuantity(field: string, value: unknown): StatusCause[] {
  if (value === undefined) return [required(field)];
  const q = tryParseQuantity(value);
  if (!q) return [invalidValue(field, value, "must be a valid quantity")];
  if (q.isZero() || q.toNumber() < 0) return [invalidValue(field, value, "must be greater than zero")];
  return [];
}

// --- PersistentVolumeClaim ---------------------------------------------------------------------------------------

function validateClaimSpec(spec: O): StatusCause[] {
  const out = validateAccessModes("spec.accessModes", spec.accessModes, "at least 1 access mode is required");
  out.push(...validateStorageQuantity("spec.resources[storage]", obj(obj(spec.resources).requests).storage));
  out.push(...oneOf("spec.volumeMode", spec.volumeMode, VOLUME_MODES));
  if (
    spec.storageClassName !== undefined &&
    spec.storageClassName !== null &&
    typeof spec.storageClassName !== "string"
  )
    out.push(invalidValue("spec.storageClassName", spec.storageClassName, "must be a string"));
  return out;
}

/** A bound claim may change only resources.requests and volumeAttributesClassName; volumeName may be set once. */
function validateClaimUpdate(spec: O, oldSpec: O, bound: boolean): StatusCause[] {
  const next = structuredClone(spec);
  const prev = structuredClone(oldSpec);
  if (!prev.volumeName) prev.volumeName = next.volumeName;
  // RetroactiveDefaultStorageClass: an unset class may be set once (the default class, later).
  if (prev.storageClassName === undefined || prev.storageClassName === null)
    prev.storageClassName = next.storageClassName;
  if (bound) obj(next.resources).requests = obj(prev.resources).requests;
  delete next.volumeAttributesClassName;
  delete prev.volumeAttributesClassName;
  if (jsonEqual(next, prev)) return [];
  return [
    forbiddenField(
      "spec",
      "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
    ),
  ];
}

/** PersistentVolumeClaim: status.phase Pending and volumeMode Filesystem by default; validated as kube-apiserver does. */
export const persistentVolumeClaimStrategy: Strategy = {
  prepareCreate: (o: KubeObject) => {
    o.status = { phase: "Pending" };
    const spec = o.spec as O | undefined;
    if (spec) spec.volumeMode ??= "Filesystem";
  },
  validate: (o: KubeObject, old: KubeObject | undefined) => {
    const spec = obj(o.spec);
    const out = validateClaimSpec(spec);
    if (old) out.push(...validateClaimUpdate(spec, obj(old.spec), obj(old.status).phase === "Bound"));
    out.push(...oneOf("status.phase", obj(o.status).phase, ["Bound", "Lost", "Pending"]));
    return out;
  },
};

// --- PersistentVolume --------------------------------------------------------------------------------------------

function validateVolumeSource(spec: O): StatusCause[] {
  const present = PV_SOURCES.filter((s) => spec[s] !== undefined && spec[s] !== null);
  if (present.length === 0) return [required("spec", "must specify a volume type")];
  const out: StatusCause[] = present
    .slice(1)
    .map((s) => forbiddenField(`spec.${s}`, "may not specify more than 1 volume type"));
  const hostPath = obj(spec.hostPath);
  if (spec.hostPath !== undefined) {
    if (typeof hostPath.path !== "string" || hostPath.path === "") out.push(required("spec.hostPath.path"));
    out.push(...oneOf("spec.hostPath.type", hostPath.type, HOST_PATH_TYPES));
  }
  if (spec.local !== undefined) {
    const path = obj(spec.local).path;
    if (typeof path !== "string" || path === "") out.push(required("spec.local.path"));
    if (!spec.nodeAffinity) out.push(required("spec.nodeAffinity", "Local volume requires node affinity"));
  }
  return out;
}

const PV_SOURCE_AND_AFFINITY = [...PV_SOURCES, "nodeAffinity"];

/** PersistentVolume: status.phase Pending, reclaim policy Retain and volumeMode Filesystem by default. */
export const persistentVolumeStrategy: Strategy = {
  prepareCreate: (o: KubeObject) => {
    o.status = { phase: "Pending" };
    const spec = o.spec as O | undefined;
    if (spec) {
      spec.persistentVolumeReclaimPolicy ??= "Retain";
      spec.volumeMode ??= "Filesystem";
    }
  },
  validate: (o: KubeObject, old: KubeObject | undefined) => {
    const spec = obj(o.spec);
    const out = validateVolumeSource(spec);
    out.push(...validateAccessModes("spec.accessModes", spec.accessModes));
    const capacity = obj(spec.capacity);
    if (capacity.storage === undefined) out.push(required("spec.capacity"));
    else out.push(...validateStorageQuantity("spec.capacity[storage]", capacity.storage));
    out.push(
      ...oneOf("spec.persistentVolumeReclaimPolicy", spec.persistentVolumeReclaimPolicy, PV_RECLAIM_POLICIES),
      ...oneOf("spec.volumeMode", spec.volumeMode, VOLUME_MODES),
      ...oneOf("status.phase", obj(o.status).phase, ["Available", "Bound", "Failed", "Pending", "Released"]),
    );
    if (old) {
      const oldSpec = obj(old.spec);
      const changed = PV_SOURCE_AND_AFFINITY.filter((s) => s !== "nodeAffinity" && !jsonEqual(spec[s], oldSpec[s]));
      if (changed.length > 0)
        out.push(
          forbiddenField("spec.persistentvolumesource", "spec.persistentvolumesource is immutable after creation"),
        );
      if (!jsonEqual(spec.volumeMode, oldSpec.volumeMode))
        out.push(invalidValue("spec.volumeMode", spec.volumeMode, "field is immutable"));
    }
    return out;
  },
};

// --- StorageClass ------------------------------------------------------------------------------------------------

/** StorageClass: reclaimPolicy Delete and volumeBindingMode Immediate by default; its behaviour is immutable. */
export const storageClassStrategy: Strategy = {
  prepareCreate: (o: KubeObject) => {
    o.reclaimPolicy ??= "Delete";
    o.volumeBindingMode ??= "Immediate";
  },
  prepareUpdate: (o: KubeObject, old: KubeObject) => {
    // Unset on update means unchanged (the defaults are applied on every write in kube-apiserver).
    o.reclaimPolicy ??= old.reclaimPolicy ?? "Delete";
    o.volumeBindingMode ??= old.volumeBindingMode ?? "Immediate";
  },
  validate: (o: KubeObject, old: KubeObject | undefined) => {
    const out: StatusCause[] = [];
    if (typeof o.provisioner !== "string" || o.provisioner === "") out.push(required("provisioner"));
    else if (!/^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/.test(o.provisioner))
      out.push(
        invalidValue(
          "provisioner",
          o.provisioner,
          "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
        ),
      );
    out.push(
      ...oneOf("reclaimPolicy", o.reclaimPolicy, SC_RECLAIM_POLICIES),
      ...oneOf("volumeBindingMode", o.volumeBindingMode, BINDING_MODES),
    );
    if (old) {
      if (!jsonEqual(o.parameters ?? {}, old.parameters ?? {}))
        out.push(forbiddenField("parameters", "updates to parameters are forbidden."));
      if (o.provisioner !== old.provisioner)
        out.push(forbiddenField("provisioner", "updates to provisioner are forbidden."));
      if (o.reclaimPolicy !== old.reclaimPolicy)
        out.push(forbiddenField("reclaimPolicy", "updates to reclaimPolicy are forbidden."));
      if (o.volumeBindingMode !== old.volumeBindingMode)
        out.push(invalidValue("volumeBindingMode", o.volumeBindingMode, "field is immutable"));
    }
    return out;
  },
};
