/**
 * The pre-copy convergence policy (pure: no I/O, no clock of its own). After each dirty-log collection the runner
 * asks `decide()` what to do next:
 *
 *   collect --> expected downtime = pending bytes / measured bandwidth
 *                 <= maxDowntimeMs ...........................> "switch-over", except: while the guest dirties
 *                      less than half the link and the expected downtime is above a quarter of the budget, up to
 *                      two more rounds first (each leaves about dirty rate / bandwidth of the pending bytes, so a
 *                      round of a few ms of copying buys most of the downtime back)
 *                 elapsed > completion timeout ...............> "fail" (seconds resolved by the caller)
 *                 no new low of remaining bytes for progressTimeoutSec > "fail" (KubeVirt progressTimeout)
 *                 otherwise ..................................> "iterate" (send the pending pages, collect again)
 *                      and, with auto-converge, when the guest dirties faster than half the link for two rounds
 *                      running, raise the vCPU throttle: 20% first, then +10% per round, at most 99% (QEMU's steps)
 */

import type { MigrationOptions } from "./types.ts";

/** The knobs the policy reads (all of MigrationOptions but the stream's TLS). */
export type PolicyOptions = Omit<MigrationOptions, "tls">;

/** One observation after a dirty-log collection. */
export interface RoundSample {
  /** Milliseconds since the migration started. */
  readonly elapsedMs: number;
  /** Bytes collected and not yet sent. */
  readonly pendingBytes: number;
  /** Bytes the guest dirtied since the previous collection, over `intervalSec`. */
  readonly newDirtyBytes: number;
  readonly intervalSec: number;
}

/** What to do next. */
export type Decision =
  | { readonly kind: "switch-over"; readonly expectedDowntimeMs: number }
  | { readonly kind: "iterate"; readonly throttlePercent: number; readonly expectedDowntimeMs: number }
  | { readonly kind: "fail"; readonly reason: string };

/** Rounds the policy may add once within budget, to bring the downtime further down. */
export const MAX_EXTRA_ROUNDS = 2;

/** The first throttle step, the step after it, and the ceiling (QEMU cpu-throttle-initial/increment, max 99). */
export const THROTTLE_INITIAL = 20;
export const THROTTLE_INCREMENT = 10;
export const THROTTLE_MAX = 99;

/** Tracks bandwidth, dirty rate and progress across rounds, and decides. */
export class ConvergencePolicy {
  readonly #o: PolicyOptions;
  #bandwidth = 0;
  #dirtyRate = 0;
  #throttle = 0;
  #hotRounds = 0;
  #extraRounds = 0;
  #lowestRemaining = Number.POSITIVE_INFINITY;
  #lowestAtMs = 0;

  constructor(options: PolicyOptions) {
    if (!(options.maxDowntimeMs > 0)) throw new RangeError(`maxDowntimeMs must be > 0, got ${options.maxDowntimeMs}`);
    if (options.bandwidthBytesPerSec < 0) throw new RangeError("bandwidthBytesPerSec must be >= 0");
    this.#o = options;
  }

  /** Feeds a finished send: `bytes` on the wire in `seconds` (bulk pass or dirty round). */
  observeTransfer(bytes: number, seconds: number): void {
    if (bytes < 64 * 1024 || seconds <= 0) return; // too small to measure a link
    const rate = bytes / seconds;
    this.#bandwidth = this.#bandwidth === 0 ? rate : 0.5 * this.#bandwidth + 0.5 * rate;
  }

  /** Measured bandwidth (bytes/s), bounded by the cap. 0 until a transfer was large enough to measure. */
  get bandwidthBytesPerSec(): number {
    const cap = this.#o.bandwidthBytesPerSec;
    if (this.#bandwidth === 0) return cap;
    return cap > 0 ? Math.min(cap, this.#bandwidth) : this.#bandwidth;
  }

  /** The guest's dirty rate at the last sample (bytes/s). */
  get dirtyRateBytesPerSec(): number {
    return this.#dirtyRate;
  }

  /** Current vCPU throttle, percent. */
  get throttlePercent(): number {
    return this.#throttle;
  }

  /** Downtime a switch-over would cost with `pendingBytes` left, at the measured bandwidth. */
  expectedDowntimeMs(pendingBytes: number): number {
    if (pendingBytes === 0) return 0;
    const bw = this.bandwidthBytesPerSec;
    return bw > 0 ? (pendingBytes / bw) * 1000 : Number.POSITIVE_INFINITY;
  }

  /** Decides after a collection. */
  decide(s: RoundSample): Decision {
    if (s.intervalSec > 0) this.#dirtyRate = s.newDirtyBytes / s.intervalSec;
    const expected = this.expectedDowntimeMs(s.pendingBytes);
    if (expected <= this.#o.maxDowntimeMs) {
      if (this.#worthAnotherRound(expected)) {
        this.#extraRounds++;
        return { kind: "iterate", throttlePercent: this.#throttle, expectedDowntimeMs: expected };
      }
      return { kind: "switch-over", expectedDowntimeMs: expected };
    }
    if (this.#o.completionTimeoutSec > 0 && s.elapsedMs > this.#o.completionTimeoutSec * 1000) {
      return { kind: "fail", reason: `completion timeout (${this.#o.completionTimeoutSec} s)` };
    }
    if (s.pendingBytes < this.#lowestRemaining) {
      this.#lowestRemaining = s.pendingBytes;
      this.#lowestAtMs = s.elapsedMs;
    } else if (this.#o.progressTimeoutSec > 0 && s.elapsedMs - this.#lowestAtMs > this.#o.progressTimeoutSec * 1000) {
      return { kind: "fail", reason: `progress timeout (no progress in ${this.#o.progressTimeoutSec} s)` };
    }
    this.#updateThrottle();
    return { kind: "iterate", throttlePercent: this.#throttle, expectedDowntimeMs: expected };
  }

  /** Within budget already: one more round is cheap and shrinks the pending bytes by dirty rate / bandwidth. */
  #worthAnotherRound(expectedMs: number): boolean {
    const bw = this.bandwidthBytesPerSec;
    return (
      this.#extraRounds < MAX_EXTRA_ROUNDS &&
      bw > 0 &&
      this.#dirtyRate < 0.5 * bw &&
      expectedMs > this.#o.maxDowntimeMs / 4
    );
  }

  #updateThrottle(): void {
    if (!this.#o.allowAutoConverge) return;
    const bw = this.bandwidthBytesPerSec;
    const hot = bw > 0 && this.#dirtyRate > 0.5 * bw;
    this.#hotRounds = hot ? this.#hotRounds + 1 : 0;
    if (this.#hotRounds >= 2) {
      this.#throttle =
        this.#throttle === 0 ? THROTTLE_INITIAL : Math.min(THROTTLE_MAX, this.#throttle + THROTTLE_INCREMENT);
      this.#hotRounds = 0;
    }
  }
}
