/**
 * Controller references (apimachinery `metav1.GetControllerOf`): the one ownerReference with `controller: true`, and
 * the cached object it names, which counts only while its uid still matches (a recreated owner of the same name is a
 * different owner).
 */
import { type ObjectKey, objectKey } from "@kvt/api";
import type { KubeObject, OwnerReference } from "./types.ts";

/** The controller reference of an object, if any. */
export function controllerRefOf(obj: Pick<KubeObject, "metadata">): OwnerReference | undefined {
  return obj.metadata?.ownerReferences?.find((r) => r.controller);
}

/**
 * The object of kind `kind` that controls `obj`, looked up in a cache by its key, if it is there under the uid the
 * reference names.
 */
export function cachedController<T extends KubeObject>(
  obj: Pick<KubeObject, "metadata">,
  kind: string,
  lookup: (key: ObjectKey) => T | undefined,
): T | undefined {
  const ref = controllerRefOf(obj);
  if (ref?.kind !== kind) return undefined;
  const owner = lookup(objectKey(obj.metadata?.namespace, ref.name));
  return owner?.metadata?.uid === ref.uid ? owner : undefined;
}
