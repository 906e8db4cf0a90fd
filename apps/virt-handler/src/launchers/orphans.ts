/**
 * Launchers whose VMI no longer exists (deleted past its finalizers, or force-deleted) are shut down, as KubeVirt's
 * handler does with a domain that has no VMI: gracefully, with the deleted VMI's grace period when it is known.
 * So is a stale migration target: a launcher prepared for an incoming migration that is no longer the VMI's current
 * one (another migration followed while this node's handler was away): no source will ever connect to it, and
 * KubeVirt's handler likewise shuts down a domain of a VMI that does not concern its node.
 * Only once the VMI cache is synced, and only launchers this node's registry tracks, so nothing is reaped on a
 * guess (a restarted handler first re-reads every VMI).
 */
import { DEFAULT_GRACE_PERIOD_SECONDS, type VirtualMachineInstance } from "@kvt/api";
import type { Logger } from "@kvt/observability";
import type { LauncherView } from "./launcher-registry.ts";

/** What the reaper looks at. */
export interface OrphanDeps {
  /** True once the VMI cache has listed everything. */
  readonly cacheSynced: () => boolean;
  /** The VMI with this uid, from the cache. */
  readonly vmiOf: (uid: string) => VirtualMachineInstance | undefined;
  /** This node's name (a stale target is one prepared for another migration than the VMI's open one to it). */
  readonly nodeName: string;
  readonly launchers: () => LauncherView[];
  readonly logger: Logger;
}

/**
 * True when `view` waits for an incoming migration other than `vmi`'s current one (pure). Deliberately narrow: a
 * launcher of the current migration is the target plan's to judge (its `completed` may reach the cache before the
 * launcher's report that it now runs the guest), and no launcher on the VMI's own node is ever judged here.
 */
export function isStaleTarget(view: LauncherView, vmi: VirtualMachineInstance, nodeName: string): boolean {
  if (view.info.state !== "IncomingMigration" || vmi.status?.nodeName === nodeName) return false;
  const waitingFor = view.info.migration?.migrationUid;
  return waitingFor !== undefined && waitingFor !== vmi.status?.migrationState?.migrationUid;
}

/** The live launchers whose VMI is gone, and the stale migration targets (pure). */
export function orphansOf(
  views: readonly LauncherView[],
  vmiOf: (uid: string) => VirtualMachineInstance | undefined,
  nodeName: string,
): LauncherView[] {
  return views.filter((v) => {
    if (v.gone || v.info.state === "Shutdown" || v.info.state === "Crashed") return false;
    const vmi = vmiOf(v.info.vmi.uid);
    return !vmi || isStaleTarget(v, vmi, nodeName);
  });
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
    for (const view of orphansOf(this.#d.launchers(), this.#d.vmiOf, this.#d.nodeName)) {
      if (this.#reaping.has(view.socketPath)) continue;
      this.#reaping.add(view.socketPath);
      const uid = view.info.vmi.uid;
      const grace = this.#grace.get(uid) ?? DEFAULT_GRACE_PERIOD_SECONDS;
      const why = this.#d.vmiOf(uid) ? "stale migration target" : "VMI is gone";
      this.#d.logger.info({ vmi: view.info.vmi, gracePeriodSeconds: grace }, `${why}: shutting its launcher down`);
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
