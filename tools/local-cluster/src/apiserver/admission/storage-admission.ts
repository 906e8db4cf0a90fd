/**
 * kube-apiserver's storage admission plugins (always on in a real cluster):
 *
 * - DefaultStorageClass: a PersistentVolumeClaim created without a class (spec.storageClassName unset and no
 *   `volume.beta.kubernetes.io/storage-class` annotation) gets the default StorageClass; with several defaults the
 *   newest wins (then the name), as since Kubernetes 1.26. An explicit `""` means "no class" and is kept.
 * - StorageObjectInUseProtection: new claims get the `kubernetes.io/pvc-protection` finalizer and new volumes
 *   `kubernetes.io/pv-protection`, which the protection controllers remove once nothing uses them.
 */
import type { Store } from "../storage/store.ts";
import { isDefaultClass } from "../table/storage-printers.ts";
import type { KubeObject } from "../types.ts";
import type { AdmissionAttributes, MutatingAdmission } from "./types.ts";

/** Finalizer that keeps a claim while a pod uses it. */
export const PVC_PROTECTION_FINALIZER = "kubernetes.io/pvc-protection";
/** Finalizer that keeps a volume while a claim is bound to it. */
export const PV_PROTECTION_FINALIZER = "kubernetes.io/pv-protection";
/** The pre-1.6 way to name a claim's class, still honoured. */
export const BETA_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class";

/** The default StorageClass among `classes` (newest, then by name), or undefined. */
export function defaultStorageClass(classes: readonly KubeObject[]): KubeObject | undefined {
  const defaults = classes.filter(isDefaultClass);
  defaults.sort(
    (a, b) =>
      String(b.metadata.creationTimestamp ?? "").localeCompare(String(a.metadata.creationTimestamp ?? "")) ||
      String(a.metadata.name).localeCompare(String(b.metadata.name)),
  );
  return defaults[0];
}

/** DefaultStorageClass. */
export function defaultStorageClassAdmission(store: Store): MutatingAdmission {
  return {
    name: "DefaultStorageClass",
    admit(attrs: AdmissionAttributes): Promise<KubeObject | undefined> {
      const pvc = attrs.object;
      if (attrs.operation !== "CREATE" || attrs.resource !== "persistentvolumeclaims" || attrs.group !== "" || !pvc)
        return Promise.resolve(undefined);
      if (attrs.subResource !== "") return Promise.resolve(undefined);
      const spec = (pvc.spec ?? {}) as Record<string, unknown>;
      const classSet = spec.storageClassName !== undefined && spec.storageClassName !== null;
      if (classSet || pvc.metadata.annotations?.[BETA_STORAGE_CLASS_ANNOTATION] !== undefined)
        return Promise.resolve(undefined);
      const def = defaultStorageClass(store.list("storage.k8s.io/storageclasses").map((e) => e.obj));
      if (!def) return Promise.resolve(undefined);
      return Promise.resolve({ ...pvc, spec: { ...spec, storageClassName: def.metadata.name } });
    },
  };
}

/** StorageObjectInUseProtection. */
export function storageProtectionAdmission(): MutatingAdmission {
  return {
    name: "StorageObjectInUseProtection",
    admit(attrs: AdmissionAttributes): Promise<KubeObject | undefined> {
      const o = attrs.object;
      if (attrs.operation !== "CREATE" || attrs.group !== "" || attrs.subResource !== "" || !o)
        return Promise.resolve(undefined);
      const finalizer =
        attrs.resource === "persistentvolumeclaims"
          ? PVC_PROTECTION_FINALIZER
          : attrs.resource === "persistentvolumes"
            ? PV_PROTECTION_FINALIZER
            : undefined;
      if (!finalizer || o.metadata.finalizers?.includes(finalizer)) return Promise.resolve(undefined);
      return Promise.resolve({
        ...o,
        metadata: { ...o.metadata, finalizers: [...(o.metadata.finalizers ?? []), finalizer] },
      });
    },
  };
}
