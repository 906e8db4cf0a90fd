/** Informer stores for controller tests, filled directly instead of by list/watch. */
import { type IndexFunc, type KubeObject, Store } from "@kvt/kube";

/** A Store holding `objects`, with `indexers`. */
export function fakeStore<T extends KubeObject>(
  objects: readonly T[] = [],
  indexers: Readonly<Record<string, IndexFunc<T>>> = {},
): Store<T> {
  const store = new Store<T>(indexers);
  for (const o of objects) store.upsert(o);
  return store;
}
