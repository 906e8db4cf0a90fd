/**
 * Writes the informer cache has not shown yet (the job of client-go's `MutationCache`, kept minimal): after a
 * controller updates an object, the watch event of that update can arrive after events of other objects that
 * re-enqueue the key (the pod a VMI reconcile just created, for one). A reconcile run in that window reads the
 * version its own write replaced, plans the same change again and fails with a 409 Conflict, then retries.
 *
 * ```
 *   update(obj@rv5) ok ──> wrote(key, "5") ──> reconcile: cache still at rv5? ──yes──> skip (the update's own
 *                                               │                                      event re-enqueues the key)
 *                                               └─no (cache moved on) ──> forget, reconcile normally
 * ```
 * Only equality of resourceVersions is used (they are opaque). An entry older than the TTL (30 s) no longer
 * holds a reconcile back, so a lost watch event cannot stall a key.
 */
import type { ObjectKey } from "@kvt/api";

/** How long a recorded write may hold back reconciles of its key (ms). */
export const UNOBSERVED_WRITE_TTL_MS = 30_000;

/** The resourceVersion each key's last successful write replaced, until the cache shows a newer one. */
export class UnobservedWrites {
  readonly #replaced = new Map<ObjectKey, { rv: string; at: number }>();
  readonly #ttlMs: number;
  readonly #now: () => number;

  constructor(options: { ttlMs?: number; now?: () => number } = {}) {
    this.#ttlMs = options.ttlMs ?? UNOBSERVED_WRITE_TTL_MS;
    this.#now = options.now ?? Date.now;
  }

  /** Records a successful write of `key` that replaced version `replacedRv` (the version the write was based on). */
  wrote(key: ObjectKey, replacedRv: string | undefined): void {
    if (replacedRv) this.#replaced.set(key, { rv: replacedRv, at: this.#now() });
  }

  /**
   * True while the cache still holds the version a recent write of ours replaced: a reconcile now would act on
   * stale data. Forgets the entry once the cache has moved on or the TTL has passed.
   */
  pending(key: ObjectKey, cachedRv: string | undefined): boolean {
    const w = this.#replaced.get(key);
    if (!w) return false;
    if (w.rv === cachedRv && this.#now() - w.at < this.#ttlMs) return true;
    this.#replaced.delete(key);
    return false;
  }

  /** Forgets `key` (the object was deleted). */
  forget(key: ObjectKey): void {
    this.#replaced.delete(key);
  }

  /** Number of keys with a write not yet seen (for tests and debugging). */
  get size(): number {
    return this.#replaced.size;
  }
}
