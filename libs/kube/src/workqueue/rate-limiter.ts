/**
 * Retry delays for the workqueue (client-go `DefaultControllerRateLimiter`): the larger of a per-key exponential
 * backoff (5 ms doubling to 1000 s) and an overall token bucket (10 qps, burst 100).
 */

/** Decides how long a key waits before its next retry. */
export interface RateLimiter {
  /** Delay in ms before `key` may be retried; counts a failure. */
  when(key: string): number;
  /** Forgets `key`'s failures (after a success). */
  forget(key: string): void;
  /** Failures counted for `key`. */
  numRequeues(key: string): number;
}

/** Per-key exponential backoff: `baseMs * 2^failures`, capped at `maxMs`. */
export class ItemExponentialRateLimiter implements RateLimiter {
  readonly #failures = new Map<string, number>();
  readonly #baseMs: number;
  readonly #maxMs: number;
  constructor(baseMs = 5, maxMs = 1_000_000) {
    this.#baseMs = baseMs;
    this.#maxMs = maxMs;
  }
  when(key: string): number {
    const n = this.#failures.get(key) ?? 0;
    this.#failures.set(key, n + 1);
    return Math.min(this.#maxMs, this.#baseMs * 2 ** Math.min(n, 40));
  }
  forget(key: string): void {
    this.#failures.delete(key);
  }
  numRequeues(key: string): number {
    return this.#failures.get(key) ?? 0;
  }
}

/** Overall token bucket: `qps` tokens a second, at most `burst` saved; a retry without a token waits for one. */
export class BucketRateLimiter implements RateLimiter {
  readonly #qps: number;
  readonly #burst: number;
  readonly #now: () => number;
  #tokens: number;
  #last: number;
  constructor(qps = 10, burst = 100, now: () => number = () => performance.now()) {
    this.#qps = qps;
    this.#burst = burst;
    this.#now = now;
    this.#tokens = burst;
    this.#last = now();
  }
  when(_key: string): number {
    const now = this.#now();
    this.#tokens = Math.min(this.#burst, this.#tokens + ((now - this.#last) / 1000) * this.#qps);
    this.#last = now;
    this.#tokens -= 1;
    return this.#tokens >= 0 ? 0 : (-this.#tokens / this.#qps) * 1000;
  }
  forget(_key: string): void {}
  numRequeues(_key: string): number {
    return 0;
  }
}

/** The maximum of several limiters' delays. */
export class MaxOfRateLimiter implements RateLimiter {
  readonly #limiters: readonly RateLimiter[];
  constructor(...limiters: RateLimiter[]) {
    this.#limiters = limiters;
  }
  when(key: string): number {
    return Math.max(...this.#limiters.map((l) => l.when(key)));
  }
  forget(key: string): void {
    for (const l of this.#limiters) l.forget(key);
  }
  numRequeues(key: string): number {
    return Math.max(...this.#limiters.map((l) => l.numRequeues(key)));
  }
}

/** client-go's default: max(per-key 5 ms..1000 s, 10 qps / burst 100). */
export function defaultControllerRateLimiter(): RateLimiter {
  return new MaxOfRateLimiter(new ItemExponentialRateLimiter(5, 1_000_000), new BucketRateLimiter(10, 100));
}
