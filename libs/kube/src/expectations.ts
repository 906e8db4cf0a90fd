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
