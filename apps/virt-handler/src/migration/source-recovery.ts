/**
 * What the source node's handler concludes when the launcher of a migrating VMI is not there (pure; table-tested).
 *
 * A source launcher exits once its guest has moved (domain Migrated), so a handler that was down during the move
 * (kill -9, a restart) finds no launcher when it comes back: that alone does not mean the guest is lost. KubeVirt's
 * source handler waits for the target's handler to report the domain (hasTargetDetectedReadyDomain, 60 s); here the
 * target's handler does the handoff itself (migration-status.ts), so the source only has to keep its hands off the
 * VMI for that long:
 *
 * ```
 *  source launcher here, alive ------------------------------------------> none (the usual source half)
 *  gone, its last report says the move succeeded (Migrated) -------------> none (sourceMigrationStatus hands off)
 *  gone after Crashed/Shutdown or before it reported sending, or no migration
 *  open, or the target never published an address (no byte of the guest
 *  can have left) -------------------------------------------------------> none (the VMI fails: LauncherExited)
 *  missing or gone while the guest was running and a migration was open:
 *      for less than TARGET_REPORT_TIMEOUT_MS -------------------------> await-target (phase kept, requeue)
 *      for longer -----------------------------------------------------> lost: VMI Failed (LauncherExited) and
 *                                                                         the migration failed with the reason
 * ```
 */
import type { MigrationState, VirtualMachineInstance, VirtualMachineInstanceStatus } from "@kvt/api";
import type { LauncherFacts } from "../vmi/vmi-status.ts";

/** How long the source waits for the target's handler to take the VMI over (KubeVirt's migrationTargetDelayTimeout). */
export const TARGET_REPORT_TIMEOUT_MS = 60_000;

/** The source-side verdict on a migrating VMI whose launcher is missing. */
export type SourceLauncherLoss =
  | { readonly kind: "none" }
  | { readonly kind: "await-target"; readonly retryAfterMs: number }
  | { readonly kind: "lost"; readonly failureReason: string };

/** The failure reason recorded when the target never took the VMI over. */
export function lostReason(timeoutMs: number): string {
  return (
    `the source virt-launcher exited during the migration and the domain was not reported on the destination node ` +
    `within ${Math.round(timeoutMs / 1000)} seconds`
  );
}

/**
 * Decides for VMI `vmi` (owned by node `nodeName`) from what the launcher registry knows, `missingForMs` being how
 * long this handler has seen the launcher missing or gone.
 */
export function sourceLauncherLoss(
  vmi: VirtualMachineInstance,
  facts: LauncherFacts,
  nodeName: string,
  missingForMs: number,
  timeoutMs = TARGET_REPORT_TIMEOUT_MS,
): SourceLauncherLoss {
  const ms = vmi.status?.migrationState;
  if (!openMigrationFrom(vmi, nodeName)) return { kind: "none" };
  // The target never published where to send: the source cannot have sent anything, the guest was only here.
  if (!ms?.targetNodeAddress) return { kind: "none" };
  const info = facts.info;
  const missing = facts.registrySynced && !info;
  if (!missing && !facts.gone) return { kind: "none" };
  if (info) {
    const m = info.migration;
    if (info.state === "Migrated" || (m !== undefined && m.migrationUid === ms.migrationUid && m.phase === "Succeeded"))
      return { kind: "none" }; // the source's own report of success: the usual handoff
    if (info.state !== "Running" && info.state !== "Paused") return { kind: "none" }; // it ended before: lost here
    // It died before it ever reported sending this migration: no byte of the guest left, nothing to wait for.
    if (m === undefined || m.migrationUid !== ms.migrationUid || m.role !== "source") return { kind: "none" };
  }
  if (missingForMs >= timeoutMs) return { kind: "lost", failureReason: lostReason(timeoutMs) };
  return { kind: "await-target", retryAfterMs: Math.max(1000, timeoutMs - missingForMs) };
}

/** True when a migration away from `nodeName` is open on `vmi` (not completed, not failed, target elsewhere). */
export function openMigrationFrom(vmi: VirtualMachineInstance, nodeName: string): boolean {
  const ms = vmi.status?.migrationState;
  return (
    !!ms?.migrationUid &&
    !ms.completed &&
    !ms.failed &&
    !!ms.targetNode &&
    ms.targetNode !== nodeName &&
    vmi.status?.nodeName === nodeName
  );
}

/** The migration half of a `lost` verdict: the migration failed, with the reason and an end time. */
export function failLostMigration(
  status: VirtualMachineInstanceStatus,
  failureReason: string,
  now: string,
): VirtualMachineInstanceStatus {
  const ms = status.migrationState;
  if (!ms || ms.completed || ms.failed) return status;
  const failed: MigrationState = { ...ms, failed: true, failureReason, endTimestamp: ms.endTimestamp ?? now };
  if (ms.abortRequested) failed.abortStatus = "Failed";
  return { ...status, migrationState: failed };
}
