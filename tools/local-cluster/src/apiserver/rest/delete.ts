/**
 * Deletion with Kubernetes semantics:
 *
 *   DELETE  --preconditions-->  409 if uid/resourceVersion differ
 *           --propagation-->    Orphan: +finalizer "orphan";  Foreground: +finalizer "foregroundDeletion"
 *           --grace-->          pods on a node: deletionTimestamp = now+grace, deletionGracePeriodSeconds = grace
 *           finalizers or grace left  ->  update: deletionTimestamp set, generation+1 (MODIFIED), object kept
 *           otherwise                 ->  removed now (DELETED); dependents are the garbage collector's job
 *
 * Namespaces always go through Terminating (spec.finalizers "kubernetes"); the namespace controller empties them.
 */
import { conflict, type Status, statusError } from "../errors.ts";
import { collOf, idOf, type ResourceDef } from "../resources/types.ts";
import type { Entry } from "../storage/store.ts";
import { cloneJson, type KubeObject, nowTime } from "../types.ts";
import type { ResourceService, WriteContext } from "./service.ts";

/** metav1.DeleteOptions as the server reads them. */
export interface DeleteOptions {
  propagationPolicy?: "Background" | "Foreground" | "Orphan";
  gracePeriodSeconds?: number;
  preconditions?: { uid?: string; resourceVersion?: string };
  orphanDependents?: boolean;
}

/** The result: the object (kept or last state) and whether it is gone. */
export interface DeleteResult {
  readonly entry: Entry;
  readonly deleted: boolean;
}

/** Finalizers the garbage collector understands. */
export const FINALIZER_ORPHAN = "orphan";
export const FINALIZER_FOREGROUND = "foregroundDeletion";

/** Deletes one object. */
export async function deleteObject(
  svc: ResourceService,
  def: ResourceDef,
  ns: string | undefined,
  name: string,
  opts: DeleteOptions,
  ctx: WriteContext,
  how: { readonly admit?: boolean } = {},
): Promise<DeleteResult> {
  const cur = svc.get(def, ns, name);
  const old = cur.obj;
  const pre = opts.preconditions;
  if (pre?.uid && pre.uid !== old.metadata.uid)
    throw conflict(
      def,
      name,
      `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${old.metadata.uid ?? ""}`,
    );
  if (pre?.resourceVersion && pre.resourceVersion !== old.metadata.resourceVersion)
    throw conflict(
      def,
      name,
      `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${old.metadata.resourceVersion ?? ""}`,
    );
  if (
    opts.gracePeriodSeconds !== undefined &&
    (!Number.isInteger(opts.gracePeriodSeconds) || opts.gracePeriodSeconds < 0)
  )
    throw statusError(
      422,
      "Invalid",
      "DeleteOptions.gracePeriodSeconds: Invalid value: must be a non-negative integer",
    );
  // An eviction deletes its pod without DELETE admission (kube-apiserver: rest.ValidateAllObjectFunc).
  if (how.admit !== false)
    await svc.admission.validate({
      operation: "DELETE",
      group: def.group,
      version: def.versions[0],
      kind: def.kind,
      resource: def.resource,
      subResource: "",
      namespace: ns ?? "",
      name,
      object: null,
      oldObject: old,
      dryRun: ctx.dryRun,
      userInfo: ctx.user,
      options: ctx.options,
      warnings: ctx.warnings,
    });
  const coll = collOf(def);
  const id = idOf(def, ns, name);
  const obj: KubeObject = cloneJson(old);
  const m = obj.metadata;
  const finalizers = new Set(m.finalizers ?? []);
  const policy = opts.propagationPolicy ?? (opts.orphanDependents ? "Orphan" : undefined);
  if (policy === "Orphan") {
    finalizers.add(FINALIZER_ORPHAN);
    finalizers.delete(FINALIZER_FOREGROUND);
  } else if (policy === "Foreground") {
    finalizers.add(FINALIZER_FOREGROUND);
    finalizers.delete(FINALIZER_ORPHAN);
  } else if (policy === "Background" && m.deletionTimestamp) {
    finalizers.delete(FINALIZER_ORPHAN);
    finalizers.delete(FINALIZER_FOREGROUND);
  }
  const isNamespace = def.group === "" && def.resource === "namespaces";
  const grace = isNamespace ? 0 : (opts.gracePeriodSeconds ?? def.strategy.gracePeriod?.(old) ?? 0);
  const nsFinalizers = isNamespace ? ((obj.spec as { finalizers?: string[] } | undefined)?.finalizers ?? []) : [];
  const keep = finalizers.size > 0 || grace > 0 || nsFinalizers.length > 0;
  if (!keep) {
    if (ctx.dryRun) return { entry: cur, deleted: true };
    const { entry, committed } = svc.store.remove(coll, id, obj);
    await committed;
    return { entry, deleted: true };
  }
  const now = Date.now();
  if (!m.deletionTimestamp) {
    m.deletionTimestamp = nowTime(now + grace * 1000);
    m.deletionGracePeriodSeconds = grace;
    if (m.generation !== undefined && m.generation > 0) m.generation++;
  } else if (m.deletionGracePeriodSeconds !== undefined && grace < m.deletionGracePeriodSeconds) {
    m.deletionTimestamp = nowTime(now + grace * 1000);
    m.deletionGracePeriodSeconds = grace;
  }
  if (isNamespace) obj.status = { ...(obj.status ?? {}), phase: "Terminating" };
  m.finalizers = [...finalizers];
  if (m.finalizers.length === 0) delete m.finalizers;
  if (ctx.dryRun) return { entry: { ...cur, obj, json: JSON.stringify(obj) }, deleted: false };
  if (finalizers.size === 0 && nsFinalizers.length === 0 && m.deletionGracePeriodSeconds === 0) {
    const { entry, committed } = svc.store.remove(coll, id, obj);
    await committed;
    return { entry, deleted: true };
  }
  obj.metadata.resourceVersion = old.metadata.resourceVersion;
  if (JSON.stringify(obj) === cur.json) return { entry: cur, deleted: false };
  const { entry, committed } = svc.store.put(coll, id, obj);
  await committed;
  return { entry, deleted: false };
}

/** The Success Status a DELETE answers with for kinds that do not return the deleted object. */
export function deleteStatus(def: ResourceDef, obj: KubeObject): Status {
  return {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Success",
    details: { name: obj.metadata.name, group: def.group, kind: def.resource, uid: obj.metadata.uid },
    code: 200,
  };
}
