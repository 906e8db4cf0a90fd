/**
 * A client-go-style rate-limited workqueue of keys.
 *
 * ```
 *  add(k) ──> dirty? ──yes──> (merged)
 *               │no
 *               v
 *          dirty += k ──> processing? ──yes──> (re-queued by done(k))
 *                              │no
 *                              v
 *                           queue ──get()──> processing += k, dirty -= k ──done(k)──> dirty? ──yes──> queue
 * ```
 * A key is never in the queue twice and never handed to two workers at once. `addAfter` keeps one timer per key
 * (the earliest); `addRateLimited` delays by the rate limiter.
 */
import type { Registry } from "prom-client";
import { defaultControllerRateLimiter, type RateLimiter } from "./rate-limiter.ts";
import { type WorkqueueMetrics, workqueueMetrics } from "./workqueue-metrics.ts";

/** Options for {@link WorkQueue}. */
export interface WorkQueueOptions {
  /** Queue name, the `name` label of the metrics (e.g. `virt-controller-vm`). */
  readonly name: string;
  readonly rateLimiter?: RateLimiter;
  /** Registry for `kubevirt_workqueue_*`; none means no metrics. */
  readonly registry?: Registry;
}

/** De-duplicating, rate-limited queue of keys. */
export class WorkQueue<K extends string = string> {
  readonly name: string;
  readonly #queue: K[] = [];
  readonly #dirty = new Set<K>();
  readonly #processing = new Map<K, number>();
  readonly #addedAt = new Map<K, number>();
  readonly #timers = new Map<K, { at: number; timer: ReturnType<typeof setTimeout> }>();
  readonly #waiters: ((key: K | undefined) => void)[] = [];
  readonly #limiter: RateLimiter;
  readonly #metrics: WorkqueueMetrics | undefined;
  #shuttingDown = false;

  constructor(options: WorkQueueOptions) {
    this.name = options.name;
    this.#limiter = options.rateLimiter ?? defaultControllerRateLimiter();
    this.#metrics = options.registry ? workqueueMetrics(options.registry) : undefined;
  }

  /** Keys waiting (not being processed). */
  get length(): number {
    return this.#queue.length;
  }

  /** True after {@link shutDown}. */
  get shuttingDown(): boolean {
    return this.#shuttingDown;
  }

  /** Queues `key` unless it is already waiting; a key being processed is re-queued when done. */
  add(key: K): void {
    if (this.#shuttingDown || this.#dirty.has(key)) return;
    this.#metrics?.adds.inc({ name: this.name });
    this.#dirty.add(key);
    if (this.#processing.has(key)) return;
    this.#push(key);
  }

  /** Adds `key` after `ms` milliseconds; an earlier pending add wins. */
  addAfter(key: K, ms: number): void {
    if (this.#shuttingDown) return;
    if (ms <= 0) {
      this.add(key);
      return;
    }
    const at = performance.now() + ms;
    const pending = this.#timers.get(key);
    if (pending && pending.at <= at) return;
    if (pending) clearTimeout(pending.timer);
    const timer = setTimeout(() => {
      this.#timers.delete(key);
      this.add(key);
    }, ms);
    this.#timers.set(key, { at, timer });
  }

  /** Adds `key` after the rate limiter's delay (a retry). */
  addRateLimited(key: K): void {
    this.#metrics?.retries.inc({ name: this.name });
    this.addAfter(key, this.#limiter.when(key));
  }

  /** Clears `key`'s failure history. */
  forget(key: K): void {
    this.#limiter.forget(key);
  }

  /** How many times `key` has been retried since it was last forgotten. */
  numRequeues(key: K): number {
    return this.#limiter.numRequeues(key);
  }

  /** Waits for the next key; resolves to `undefined` once shut down. Call {@link done} when finished with it. */
  get(): Promise<K | undefined> {
    const key = this.#queue.shift();
    if (key !== undefined) return Promise.resolve(this.#take(key));
    if (this.#shuttingDown) return Promise.resolve(undefined);
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Marks `key` processed; re-queues it when it was added meanwhile. */
  done(key: K): void {
    const started = this.#processing.get(key);
    this.#processing.delete(key);
    if (started !== undefined)
      this.#metrics?.workDuration.observe({ name: this.name }, (performance.now() - started) / 1000);
    if (this.#dirty.has(key)) this.#push(key);
  }

  /** Stops handing out keys; waiting `get()` calls resolve to `undefined`; pending delayed adds are dropped. */
  shutDown(): void {
    this.#shuttingDown = true;
    for (const { timer } of this.#timers.values()) clearTimeout(timer);
    this.#timers.clear();
    for (const w of this.#waiters.splice(0)) w(undefined);
  }

  /** Updates the gauges that describe in-flight work (called on scrape by the runner). */
  updateUnfinishedWork(): void {
    if (!this.#metrics) return;
    const now = performance.now();
    let total = 0;
    let longest = 0;
    for (const started of this.#processing.values()) {
      total += now - started;
      longest = Math.max(longest, now - started);
    }
    this.#metrics.unfinishedWork.set({ name: this.name }, total / 1000);
    this.#metrics.longestRunning.set({ name: this.name }, longest / 1000);
  }

  #push(key: K): void {
    const waiter = this.#waiters.shift();
    this.#addedAt.set(key, performance.now());
    if (waiter) {
      waiter(this.#take(key));
      return;
    }
    this.#queue.push(key);
    this.#metrics?.depth.set({ name: this.name }, this.#queue.length);
  }

  #take(key: K): K {
    this.#dirty.delete(key);
    this.#processing.set(key, performance.now());
    const added = this.#addedAt.get(key);
    this.#addedAt.delete(key);
    if (this.#metrics) {
      this.#metrics.depth.set({ name: this.name }, this.#queue.length);
      if (added !== undefined)
        this.#metrics.queueDuration.observe({ name: this.name }, (performance.now() - added) / 1000);
    }
    return key;
  }
}
