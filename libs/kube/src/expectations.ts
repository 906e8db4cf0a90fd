/**
 * Controller expectations (client-go `ControllerExpectations`, KubeVirt `UIDTrackingControllerExpectations`):
 * a controller raises them *before* it creates or deletes objects and the informer handlers lower them when the
 * cache sees the result, so a reconcile never acts on a cache that has not caught up with its own writes.
 * Expectations older than the TTL (5 min) count as satisfied, so a lost watch event cannot block a key forever.
 */
import type { ObjectKey } from "@kvt/api";

interface Record {
  adds: number;
  deletes: Set<string>;
  deleteCount: number;
  at: number;
}

/** Default TTL of an expectation: 5 minutes. */
export const EXPECTATIONS_TTL_MS = 5 * 60_000;

/** Pending creates and deletes per controller key. */
export class Expectations {
  readonly #records = new Map<ObjectKey, Record>();
  readonly #ttlMs: number;
  readonly #now: () => number;

  constructor(options: { ttlMs?: number; now?: () => number } = {}) {
    this.#ttlMs = options.ttlMs ?? EXPECTATIONS_TTL_MS;
    this.#now = options.now ?? Date.now;
  }

  /** Expects `count` creations for `key` (adds to any still pending). */
  expectCreations(key: ObjectKey, count = 1): void {
    const r = this.#record(key);
    r.adds += count;
    r.at = this.#now();
  }

  /** Expects the deletion of the objects with these uids (or `count` unnamed deletions). */
  expectDeletions(key: ObjectKey, uids: readonly string[] | number): void {
    const r = this.#record(key);
    if (typeof uids === "number") r.deleteCount += uids;
    else for (const uid of uids) r.deletes.add(uid);
    r.at = this.#now();
  }

  /** The informer saw a creation for `key`. */
  creationObserved(key: ObjectKey): void {
    const r = this.#records.get(key);
    if (r && r.adds > 0) r.adds--;
  }

  /** The informer saw the deletion of `uid` (or one unnamed deletion) for `key`. */
  deletionObserved(key: ObjectKey, uid?: string): void {
    const r = this.#records.get(key);
    if (!r) return;
    if (uid !== undefined && r.deletes.delete(uid)) return;
    if (r.deleteCount > 0) r.deleteCount--;
  }

  /** A create failed: it will never be observed. */
  lowerCreations(key: ObjectKey, count = 1): void {
    const r = this.#records.get(key);
    if (r) r.adds = Math.max(0, r.adds - count);
  }

  /** A delete failed (and the object is not going away): it will never be observed. */
  lowerDeletions(key: ObjectKey, uid?: string): void {
    this.deletionObserved(key, uid);
  }

  /** True when nothing is pending for `key`, or what is pending has expired. */
  satisfied(key: ObjectKey): boolean {
    const r = this.#records.get(key);
    if (!r) return true;
    if (r.adds <= 0 && r.deletes.size === 0 && r.deleteCount <= 0) return true;
    return this.#now() - r.at > this.#ttlMs;
  }

  /**
   * Runs one create for `key` with its expectation raised first. A create the server refuses will never be observed,
   * so its expectation is lowered again and the error rethrown.
   */
  async creating<T>(key: ObjectKey, create: () => Promise<T>): Promise<T> {
    this.expectCreations(key, 1);
    try {
      return await create();
    } catch (error) {
      this.lowerCreations(key);
      throw error;
    }
  }

  /**
   * Runs these creates at once for `key`, all expected first; each refused one is lowered again. Returns the settled
   * results in order (read the first failure with `firstRejection`).
   */
  creatingAll<T>(key: ObjectKey, creates: readonly (() => Promise<T>)[]): Promise<PromiseSettledResult<T>[]> {
    return Promise.allSettled(creates.map((create) => this.creating(key, create)));
  }

  /**
   * Runs one delete of the object `uid` for `key` with its expectation raised first. A delete the server refuses
   * (404 included: the object was already gone and its deletion was observed before) is lowered again and rethrown.
   */
  async deleting<T>(key: ObjectKey, uid: string, remove: () => Promise<T>): Promise<T> {
    this.expectDeletions(key, [uid]);
    try {
      return await remove();
    } catch (error) {
      this.lowerDeletions(key, uid);
      throw error;
    }
  }

  /** Drops everything pending for `key` (the object is gone). */
  delete(key: ObjectKey): void {
    this.#records.delete(key);
  }

  #record(key: ObjectKey): Record {
    let r = this.#records.get(key);
    if (!r) {
      r = { adds: 0, deletes: new Set(), deleteCount: 0, at: this.#now() };
      this.#records.set(key, r);
    }
    return r;
  }
}

/** The reason of the first rejected result, or undefined when every one was fulfilled. */
export function firstRejection(results: readonly PromiseSettledResult<unknown>[]): unknown {
  return results.find((r): r is PromiseRejectedResult => r.status === "rejected")?.reason;
}
