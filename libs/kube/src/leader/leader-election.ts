/**
 * Leader election on a `coordination.k8s.io/v1` Lease (client-go `leaderelection`, KubeVirt's 15 s / 10 s / 2 s).
 *
 * ```
 *  follower ──(lease free, or not renewed for leaseDuration by our clock)──> try acquire (PUT with resourceVersion)
 *     ^                                                                         │ ok
 *     │                                                                         v
 *     └── lost (no successful renew for renewDeadline) <──renew every retryPeriod── leader ──abort──> release
 * ```
 * Expiry is judged by when *we* last saw the lease record change (observed time), not by the holder's clock.
 * On abort the leader releases the lease (empty holder, 1 s duration) so a standby takes over at once.
 */
import type { Logger } from "pino";
import type { ResourceClient } from "../client/resource-client.ts";
import { isConflict, isNotFound } from "../errors.ts";
import type { Lease } from "../types.ts";

/**
 * A metav1.MicroTime: RFC 3339 with exactly six fractional digits, the only form kube-apiserver parses for a
 * Lease's acquireTime and renewTime (`toISOString()`'s three digits are a 400 there).
 */
export function microTime(date: Date = new Date()): string {
  return date.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}

/** Options for {@link LeaderElector}. */
export interface LeaderElectorOptions {
  readonly leases: Pick<ResourceClient<Lease>, "get" | "create" | "update">;
  readonly namespace: string;
  /** Lease name, e.g. `virt-controller`. */
  readonly name: string;
  /** This candidate's identity (pod name or hostname_pid). */
  readonly identity: string;
  readonly logger: Logger;
  /** Default 15 000 ms. */
  readonly leaseDurationMs?: number;
  /** Default 10 000 ms. */
  readonly renewDeadlineMs?: number;
  /** Default 2 000 ms. */
  readonly retryPeriodMs?: number;
  /** Called when this candidate becomes leader; `signal` aborts when leadership ends. */
  onStartedLeading(signal: AbortSignal): void;
  /** Called when leadership is lost or released. */
  onStoppedLeading?(): void;
  /** Called whenever the observed leader changes. */
  onNewLeader?(identity: string): void;
}

const sleep = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done(): void {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });

/** Runs one candidate of a leader election. */
export class LeaderElector {
  readonly #o: LeaderElectorOptions;
  readonly #durationMs: number;
  readonly #deadlineMs: number;
  readonly #retryMs: number;
  #observed: Lease | undefined;
  #observedAt = 0;
  #leader = "";
  #isLeader = false;

  constructor(options: LeaderElectorOptions) {
    this.#o = options;
    this.#durationMs = options.leaseDurationMs ?? 15_000;
    this.#deadlineMs = options.renewDeadlineMs ?? 10_000;
    this.#retryMs = options.retryPeriodMs ?? 2_000;
  }

  /** True while this candidate holds the lease. */
  get isLeader(): boolean {
    return this.#isLeader;
  }

  /** The identity of the last observed holder (`""` if none). */
  get leader(): string {
    return this.#leader;
  }

  /** Campaigns until `signal` aborts: acquire, lead, and after losing the lease campaign again. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      if (await this.#tryAcquireOrRenew()) await this.#lead(signal);
      else await sleep(this.#retryMs * (1 + Math.random() * 0.2), signal);
    }
  }

  async #lead(signal: AbortSignal): Promise<void> {
    this.#isLeader = true;
    this.#o.logger.info({ lease: this.#o.name, identity: this.#o.identity }, "became leader");
    const leading = new AbortController();
    this.#o.onStartedLeading(leading.signal);
    let lastRenew = Date.now();
    while (!signal.aborted) {
      await sleep(this.#retryMs, signal);
      if (signal.aborted) break;
      if (await this.#tryAcquireOrRenew()) lastRenew = Date.now();
      else if (Date.now() - lastRenew > this.#deadlineMs || (this.#leader && this.#leader !== this.#o.identity)) {
        this.#o.logger.error({ lease: this.#o.name }, "leader election lost");
        break;
      }
    }
    this.#isLeader = false;
    leading.abort();
    if (signal.aborted) await this.#release();
    this.#o.onStoppedLeading?.();
  }

  async #tryAcquireOrRenew(): Promise<boolean> {
    const { leases, namespace, name, identity } = this.#o;
    const now = microTime();
    const spec = {
      holderIdentity: identity,
      leaseDurationSeconds: Math.ceil(this.#durationMs / 1000),
      acquireTime: now,
      renewTime: now,
      leaseTransitions: 0,
    };
    let current: Lease;
    try {
      current = await leases.get(namespace, name);
    } catch (error) {
      if (!isNotFound(error)) return this.#failed(error);
      try {
        this.#observe(await leases.create({ metadata: { name, namespace }, spec }));
        return true;
      } catch (createError) {
        return this.#failed(createError);
      }
    }
    this.#observe(current);
    const holder = current.spec?.holderIdentity ?? "";
    const expired = Date.now() - this.#observedAt > (current.spec?.leaseDurationSeconds ?? 15) * 1000;
    if (holder && holder !== identity && !expired) return false;
    const ours = holder === identity;
    const next: Lease = {
      ...current,
      spec: {
        ...spec,
        acquireTime: ours ? (current.spec?.acquireTime ?? now) : now,
        leaseTransitions: (current.spec?.leaseTransitions ?? 0) + (ours ? 0 : 1),
      },
    };
    try {
      this.#observe(await leases.update(next));
      return true;
    } catch (error) {
      return this.#failed(error);
    }
  }

  #observe(lease: Lease): void {
    const prev = this.#observed?.spec;
    const cur = lease.spec;
    if (!prev || prev.holderIdentity !== cur?.holderIdentity || prev.renewTime !== cur?.renewTime) {
      this.#observedAt = Date.now();
    }
    this.#observed = lease;
    const holder = cur?.holderIdentity ?? "";
    if (holder !== this.#leader) {
      this.#leader = holder;
      if (holder) this.#o.onNewLeader?.(holder);
    }
  }

  #failed(error: unknown): false {
    // Conflicts are the normal outcome of a lost race; anything else is logged and retried next period.
    if (!isConflict(error)) this.#o.logger.warn({ err: error, lease: this.#o.name }, "lease update failed");
    return false;
  }

  async #release(): Promise<void> {
    const lease = this.#observed;
    if (!lease || lease.spec?.holderIdentity !== this.#o.identity) return;
    try {
      await this.#o.leases.update({
        ...lease,
        spec: { ...lease.spec, holderIdentity: "", leaseDurationSeconds: 1, renewTime: microTime() },
      });
    } catch (error) {
      // Best effort: if the release fails, the lease simply expires after leaseDuration.
      this.#o.logger.warn({ err: error, lease: this.#o.name }, "lease release failed");
    }
  }
}
