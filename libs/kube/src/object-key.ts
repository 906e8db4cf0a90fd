/**
 * Object keys: `namespace/name` for namespaced objects, `name` for cluster-scoped ones (client-go
 * `MetaNamespaceKeyFunc`). Build them only through {@link keyOf}.
 */
import type { KubeObject } from "./types.ts";

/** A cache and workqueue key: `namespace/name`, or `name` when cluster-scoped. */
export type ObjectKey = string & { readonly __objectKey?: never };

/** The key of `obj` (or of a namespace and name). */
export function keyOf(obj: KubeObject): ObjectKey;
export function keyOf(namespace: string | undefined, name: string): ObjectKey;
export function keyOf(objOrNamespace: KubeObject | string | undefined, name?: string): ObjectKey {
  if (typeof objOrNamespace === "object") {
    const ns = objOrNamespace.metadata?.namespace;
    const n = objOrNamespace.metadata?.name ?? "";
    return ns ? `${ns}/${n}` : n;
  }
  return objOrNamespace ? `${objOrNamespace}/${name ?? ""}` : (name ?? "");
}

/** Splits a key into namespace (`""` when cluster-scoped) and name. */
export function splitKey(key: ObjectKey): { namespace: string; name: string } {
  const slash = key.indexOf("/");
  return slash < 0 ? { namespace: "", name: key } : { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}
