/**
 * Launchers whose VMI no longer exists (deleted past its finalizers, or force-deleted) are shut down, as KubeVirt's
 * handler does with a domain that has no VMI: gracefully, with the deleted VMI's grace period when it is known.
 * Only once the VMI cache is synced, and only launchers this node's registry tracks, so nothing is reaped on a
 * guess (a restarted handler first re-reads every VMI).
 */
import { DEFAULT_GRACE_PERIOD_SECONDS } from "@kvt/api";
import type { Logger } from "@kvt/observability";
import type { LauncherView } from "./launcher-registry.ts";

/** What the reaper looks at. */
export interface OrphanDeps {
  /** True once the VMI cache has listed everything. */
  readonly cacheSynced: () => boolean;
  /** True when a VMI with this uid exists in the cache. */
  readonly vmiExists: (uid: string) => boolean;
  readonly launchers: () => LauncherView[];
  readonly logger: Logger;
}

/** The live launchers whose VMI is gone (pure). */
export function orphansOf(views: readonly LauncherView[], vmiExists: (uid: string) => boolean): LauncherView[] {
  return views.filter(
    (v) => !v.gone && !vmiExists(v.info.vmi.uid) && v.info.state !== "Shutdown" && v.info.state !== "Crashed",
  );
}

/** Shuts orphaned launchers down; each at most once at a time. */
export class OrphanReaper {
  readonly #d: OrphanDeps;
  readonly #reaping = new Set<string>();
  readonly #grace = new Map<string, number>();

  constructor(deps: OrphanDeps) {
    this.#d = deps;
  }

  /** Remembers the grace period of a VMI that was just deleted (its launcher gets it). */
  vmiDeleted(uid: string, gracePeriodSeconds: number | undefined): void {
    this.#grace.set(uid, gracePeriodSeconds ?? DEFAULT_GRACE_PERIOD_SECONDS);
    this.reap();
  }

  /** Shuts down every current orphan (fire and forget: failures are logged and retried on the next call). */
  reap(): void {
    if (!this.#d.cacheSynced()) return;
    for (const view of orphansOf(this.#d.launchers(), this.#d.vmiExists)) {
      if (this.#reaping.has(view.socketPath)) continue;
      this.#reaping.add(view.socketPath);
      const uid = view.info.vmi.uid;
      const grace = this.#grace.get(uid) ?? DEFAULT_GRACE_PERIOD_SECONDS;
      this.#d.logger.info({ vmi: view.info.vmi, gracePeriodSeconds: grace }, "VMI is gone: shutting its launcher down");
      view.client
        .shutdown({ gracePeriodSeconds: grace }, { timeoutMs: grace * 1000 + 15_000 })
        .catch((error: unknown) =>
          this.#d.logger.warn({ err: error, vmi: view.info.vmi }, "orphan shutdown failed; will retry"),
        )
        .finally(() => {
          this.#reaping.delete(view.socketPath);
          this.#grace.delete(uid);
        });
    }
  }
}
