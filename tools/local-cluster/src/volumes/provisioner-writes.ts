/**
 * The API writes and checks every in-process provisioner shares (local-path, local-block), as external-provisioner
 * does them for a CSI driver:
 *
 *   provision: no selected node for a single-node claim -> refused; PV create -> 409 means a retry already made it
 *   reclaim:   storage removed only strictly inside the provisioner's directory; PV delete with a uid precondition
 *              (never a newer PV of the same name) -> 404 means it is gone already
 *   at start:  the provisioner's StorageClass created unless one of its name exists (an admin's edits are kept)
 */
import { relative, resolve } from "node:path";
import { ApiError } from "../apiserver/errors.ts";
import { deleteObject } from "../apiserver/rest/delete.ts";
import { type ResourceService, systemContext, type WriteContext } from "../apiserver/rest/service.ts";
import type { V1Node, V1PersistentVolume, V1PersistentVolumeClaim, V1StorageClass } from "../cluster/kube-models.ts";
import { isShared } from "./provisioned-volume.ts";

/** Creates StorageClass `sc` unless one of its name exists (an admin's edits to it are kept). */
export async function ensureStorageClass(svc: ResourceService, sc: V1StorageClass): Promise<void> {
  const def = svc.registry.lookup("storage.k8s.io", "v1", "storageclasses");
  if (!def) return;
  if (svc.store.get("storage.k8s.io/storageclasses", sc.metadata!.name!)) return;
  try {
    await svc.create(def, "v1", undefined, sc, systemContext());
  } catch (err) {
    if (!(err instanceof ApiError && err.code === 409)) throw err;
  }
}

/** Throws external-provisioner's error when a claim that is not shared has no selected node. */
export function requireNode(claim: V1PersistentVolumeClaim, node: V1Node | undefined): void {
  if (!node && !isShared(claim)) throw new Error("configuration error, no node was specified");
}

/** True when `path` lies strictly inside `dir`. */
export function isInside(dir: string, path: string): boolean {
  const rel = relative(resolve(dir), resolve(path));
  return rel !== "" && !rel.startsWith("..") && !rel.startsWith("/");
}

/** Creates the provisioned PV as `ctx`; one that exists already (a retried provision) is not an error. */
export async function createVolume(svc: ResourceService, pv: V1PersistentVolume, ctx: WriteContext): Promise<void> {
  const def = svc.registry.lookup("", "v1", "persistentvolumes")!;
  try {
    await svc.create(def, "v1", undefined, pv, ctx);
  } catch (err) {
    if (!(err instanceof ApiError && err.code === 409)) throw err;
  }
}

/** Deletes `volume` (that very one: uid precondition) as `ctx`; one gone already is not an error. */
export async function deleteVolume(svc: ResourceService, volume: V1PersistentVolume, ctx: WriteContext): Promise<void> {
  const def = svc.registry.lookup("", "v1", "persistentvolumes")!;
  try {
    await deleteObject(
      svc,
      def,
      undefined,
      volume.metadata!.name!,
      { preconditions: { uid: volume.metadata?.uid } },
      ctx,
    );
  } catch (err) {
    if (!(err instanceof ApiError && err.code === 404)) throw err;
  }
}
