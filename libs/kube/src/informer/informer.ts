/**
 * A shared informer: list, then watch from the list's resourceVersion; keep the cache and tell handlers.
 *
 * ```
 *   start ──> LIST ──ok──> WATCH(rv) ──event──> store + handlers, rv = event rv ──┐
 *              ^  \          │  ^                                                │
 *              │   fail      │  └──────── cut / timeout / network error ─────────┘ (resume from rv, after backoff on errors)
 *              │    │        │
 *              │  backoff    └── 410 Gone (HTTP or ERROR event) ──> relist
 *              └────┴──────────────────────────────────────────────────────┘
 * ```
 * A relist diffs the new list against the cache and emits add/update/delete, so no handler misses a deletion that
 * happened while the watch was down.
 */

import { keyOf, type ObjectKey } from "@kvt/api";
import type { Logger } from "pino";
import type { ListOptions, ResourceClient } from "../client/resource-client.ts";
import type { RawWatchEvent, WatchHandle } from "../client/rest-client.ts";
import { isGone } from "../errors.ts";
import type { KubeObject, Status } from "../types.ts";
import { type IndexFunc, Store } from "./store.ts";

/** Callbacks for cache changes. Handlers must not change the objects they get. */
export interface InformerHandlers<T> {
  onAdd?(obj: T): void;
  onUpdate?(oldObj: T, newObj: T): void;
  onDelete?(obj: T): void;
}

/** Options for {@link Informer}. */
export interface InformerOptions<T extends KubeObject> {
  readonly client: Pick<ResourceClient<T>, "list" | "watch" | "type">;
  readonly logger: Logger;
  /** Namespace to watch; undefined = all. */
  readonly namespace?: string;
  /** Label/field selectors for list and watch. */
  readonly selector?: Pick<ListOptions, "labelSelector" | "fieldSelector">;
  readonly indexers?: Readonly<Record<string, IndexFunc<T>>>;
  /** When set, every object is re-delivered to `onUpdate(obj, obj)` this often (ms). */
  readonly resyncMs?: number;
  /** First retry delay after a failed list/watch (ms, doubled up to 30 s); default 500. */
  readonly retryBaseMs?: number;
}

/** List-then-watch cache of one kind. */
export class Informer<T extends KubeObject> {
  /** The cache. Read-only for everyone but the informer. */
  readonly store: Store<T>;
  readonly #opts: InformerOptions<T>;
  readonly #handlers: InformerHandlers<T>[] = [];
  #resourceVersion = "";
  #synced = false;
  #syncWaiters: (() => void)[] = [];
  #stopped = true;
  #watch: WatchHandle | undefined;
  /** Counts stops: a watch that a stopped run started is ended as soon as it opens. */
  #generation = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #resync: ReturnType<typeof setInterval> | undefined;
  #failures = 0;

  constructor(options: InformerOptions<T>) {
    this.#opts = options;
    this.store = new Store<T>(options.indexers);
  }

  /** Registers handlers; objects already cached are replayed as adds. */
  addHandlers(handlers: InformerHandlers<T>): void {
    this.#handlers.push(handlers);
    for (const obj of this.store.list()) handlers.onAdd?.(obj);
  }

  /** True once the first list has filled the cache. */
  get hasSynced(): boolean {
    return this.#synced;
  }

  /** The resourceVersion the informer has seen up to. */
  get resourceVersion(): string {
    return this.#resourceVersion;
  }

  /** Resolves once the first list has filled the cache. */
  waitForSync(): Promise<void> {
    if (this.#synced) return Promise.resolve();
    return new Promise((resolve) => this.#syncWaiters.push(resolve));
  }

  /** Starts list+watch in the background. */
  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#schedule(0, () => this.#list());
    if (this.#opts.resyncMs) {
      this.#resync = setInterval(() => {
        for (const obj of this.store.list()) for (const h of this.#handlers) h.onUpdate?.(obj, obj);
      }, this.#opts.resyncMs);
      this.#resync.unref?.();
    }
  }

  /** Stops the watch and timers. */
  stop(): void {
    this.#stopped = true;
    this.#generation++;
    this.#watch?.stop();
    this.#watch = undefined;
    if (this.#timer) clearTimeout(this.#timer);
    if (this.#resync) clearInterval(this.#resync);
  }

  #schedule(ms: number, fn: () => Promise<void>): void {
    if (this.#stopped) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      fn().catch((error: unknown) => this.#opts.logger.error({ err: error }, "informer step failed"));
    }, ms);
  }

  #backoffMs(): number {
    const base = this.#opts.retryBaseMs ?? 500;
    return Math.min(30_000, base * 2 ** Math.min(this.#failures++, 16));
  }

  async #list(): Promise<void> {
    try {
      const list = await this.#opts.client.list(this.#opts.namespace, { ...this.#opts.selector });
      if (this.#stopped) return;
      this.#replace(list.items);
      this.#resourceVersion = list.metadata?.resourceVersion ?? "";
      this.#failures = 0;
      if (!this.#synced) {
        this.#synced = true;
        for (const w of this.#syncWaiters.splice(0)) w();
      }
      await this.#startWatch();
    } catch (error) {
      // Retried with backoff: the API server may be starting or briefly unreachable.
      this.#opts.logger.warn({ err: error, kind: this.#opts.client.type.kind }, "list failed; retrying");
      this.#schedule(this.#backoffMs(), () => this.#list());
    }
  }

  async #startWatch(): Promise<void> {
    if (this.#stopped) return;
    let relist = false;
    const onEvent = (event: RawWatchEvent): void => {
      if (event.type === "ERROR") {
        const status = event.object as Status;
        relist = status.code === 410;
        this.#watch?.stop();
        this.#onWatchEnd(relist, status.code === 410 ? undefined : status);
        return;
      }
      this.#apply(event);
    };
    const generation = this.#generation;
    try {
      const watch = await this.#opts.client.watch(
        this.#opts.namespace,
        { ...this.#opts.selector, resourceVersion: this.#resourceVersion },
        onEvent,
        (error) => this.#onWatchEnd(isGone(error), error ?? undefined),
      );
      // Stopped while the server was answering: nothing else would ever end this watch (its connection would hold
      // the API server's close open).
      if (generation !== this.#generation) watch.stop();
      else this.#watch = watch;
    } catch (error) {
      this.#onWatchEnd(isGone(error), error);
    }
  }

  #onWatchEnd(gone: boolean, error: unknown): void {
    this.#watch = undefined;
    if (this.#stopped) return;
    if (gone) {
      this.#opts.logger.info({ kind: this.#opts.client.type.kind }, "watch expired (410); relisting");
      this.#schedule(0, () => this.#list());
      return;
    }
    const isTimeout = error instanceof Error && error.name === "TimeoutError";
    if (error && !isTimeout) {
      this.#opts.logger.warn({ err: error, kind: this.#opts.client.type.kind }, "watch failed; resuming");
      this.#schedule(this.#backoffMs(), () => this.#startWatch());
    } else {
      // A clean cut (server or client timeout): resume at once from the last resourceVersion.
      this.#schedule(0, () => this.#startWatch());
    }
  }

  #apply(event: RawWatchEvent): void {
    const obj = event.object as T;
    const rv = obj.metadata?.resourceVersion;
    if (rv) this.#resourceVersion = rv;
    this.#failures = 0;
    if (event.type === "BOOKMARK") return;
    if (event.type === "DELETED") {
      const old = this.store.remove(keyOf(obj));
      for (const h of this.#handlers) h.onDelete?.(old ?? obj);
      return;
    }
    const old = this.store.upsert(obj);
    for (const h of this.#handlers) {
      if (old) h.onUpdate?.(old, obj);
      else h.onAdd?.(obj);
    }
  }

  #replace(items: T[]): void {
    const seen = new Set<ObjectKey>();
    for (const obj of items) {
      seen.add(keyOf(obj));
      const old = this.store.upsert(obj);
      for (const h of this.#handlers) {
        if (!old) h.onAdd?.(obj);
        else if (old.metadata?.resourceVersion !== obj.metadata?.resourceVersion) h.onUpdate?.(old, obj);
      }
    }
    for (const key of this.store.keys()) {
      if (seen.has(key)) continue;
      const old = this.store.remove(key);
      if (old) for (const h of this.#handlers) h.onDelete?.(old);
    }
  }
}
