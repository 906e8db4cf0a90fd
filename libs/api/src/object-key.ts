/** Object keys: the `namespace/name` strings that name an object in caches, queues and logs. */

/** "namespace/name" (or just "name" for cluster-scoped objects); built only through `keyOf()`. */
export type ObjectKey = string & { readonly __objectKey: unique symbol };

/** Anything with metadata (every Kubernetes object). */
export interface HasMetadata {
  metadata?: { name?: string; namespace?: string };
}

/**
 * The key of an object: "namespace/name", or "name" when it has no namespace (cluster-scoped), as client-go's
 * `MetaNamespaceKeyFunc`. Throws a TypeError when the object has no name.
 */
export function keyOf(obj: HasMetadata): ObjectKey {
  const name = obj.metadata?.name;
  if (!name) throw new TypeError("Cannot compute the key of an object without metadata.name");
  const ns = obj.metadata?.namespace;
  return (ns ? `${ns}/${name}` : name) as ObjectKey;
}

/** Builds the key of `name` in `namespace` (e.g. from a watch event or a label). */
export function objectKey(namespace: string | undefined, name: string): ObjectKey {
  if (!name) throw new TypeError("Cannot build an object key from an empty name");
  return (namespace ? `${namespace}/${name}` : name) as ObjectKey;
}

/** Splits a key back into namespace ("" for cluster-scoped) and name, as client-go's `SplitMetaNamespaceKey`. */
export function splitKey(key: ObjectKey | string): { namespace: string; name: string } {
  const parts = key.split("/");
  if (parts.length === 1) return { namespace: "", name: parts[0] };
  if (parts.length === 2 && parts[1]) return { namespace: parts[0], name: parts[1] };
  throw new TypeError(`Unexpected key format: "${key}"`);
}
