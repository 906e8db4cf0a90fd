/**
 * The informer's cache: objects by key, plus indexes (client-go `cache.Indexer`). Objects in the store are shared
 * and read-only: callers `structuredClone` one before changing it.
 */
import { keyOf, type ObjectKey } from "@kvt/api";
import { controllerRefOf } from "../owners.ts";
import type { KubeObject } from "../types.ts";

/** An index function: the index values of an object (an object may sit under several values). */
export type IndexFunc<T> = (obj: T) => readonly string[];

/** Index by namespace. */
export const namespaceIndex = <T extends KubeObject>(obj: T): string[] =>
  obj.metadata?.namespace ? [obj.metadata.namespace] : [];

/** Index by controller owner uid (the ownerReference with `controller: true`). */
export const controllerOwnerIndex = <T extends KubeObject>(obj: T): string[] => {
  const owner = controllerRefOf(obj);
  return owner ? [owner.uid] : [];
};

/** Index by the value of `label` (objects without it are not indexed). */
export function labelIndex<T extends KubeObject>(label: string): IndexFunc<T> {
  return (obj) => {
    const v = obj.metadata?.labels?.[label];
    return v === undefined ? [] : [v];
  };
}

/** A keyed object cache with named indexes. */
export class Store<T extends KubeObject> {
  readonly #items = new Map<ObjectKey, T>();
  readonly #indexers: Readonly<Record<string, IndexFunc<T>>>;
  readonly #indices = new Map<string, Map<string, Set<ObjectKey>>>();

  constructor(indexers: Readonly<Record<string, IndexFunc<T>>> = {}) {
    this.#indexers = indexers;
    for (const name of Object.keys(indexers)) this.#indices.set(name, new Map());
  }

  /** The object under `key`, if cached. */
  get(key: ObjectKey): T | undefined {
    return this.#items.get(key);
  }

  /** Every cached object. */
  list(): T[] {
    return [...this.#items.values()];
  }

  /** Every cached key. */
  keys(): ObjectKey[] {
    return [...this.#items.keys()];
  }

  /** Number of cached objects. */
  get size(): number {
    return this.#items.size;
  }

  /** The objects whose index `name` contains `value`. Throws on an unknown index (a programming error). */
  byIndex(name: string, value: string): T[] {
    const index = this.#indices.get(name);
    if (!index) throw new Error(`Cannot query index "${name}": no such indexer`);
    const keys = index.get(value);
    if (!keys) return [];
    const out: T[] = [];
    for (const k of keys) {
      const obj = this.#items.get(k);
      if (obj) out.push(obj);
    }
    return out;
  }

  /** Adds or replaces `obj`; returns the previous object. */
  upsert(obj: T): T | undefined {
    const key = keyOf(obj);
    const old = this.#items.get(key);
    if (old) this.#unindex(key, old);
    this.#items.set(key, obj);
    this.#index(key, obj);
    return old;
  }

  /** Removes the object under `key`; returns it. */
  remove(key: ObjectKey): T | undefined {
    const old = this.#items.get(key);
    if (!old) return undefined;
    this.#unindex(key, old);
    this.#items.delete(key);
    return old;
  }

  #index(key: ObjectKey, obj: T): void {
    for (const [name, fn] of Object.entries(this.#indexers)) {
      const index = this.#indices.get(name)!;
      for (const v of fn(obj)) {
        let set = index.get(v);
        if (!set) {
          set = new Set();
          index.set(v, set);
        }
        set.add(key);
      }
    }
  }

  #unindex(key: ObjectKey, obj: T): void {
    for (const [name, fn] of Object.entries(this.#indexers)) {
      const index = this.#indices.get(name)!;
      for (const v of fn(obj)) {
        const set = index.get(v);
        set?.delete(key);
        if (set?.size === 0) index.delete(v);
      }
    }
  }
}
