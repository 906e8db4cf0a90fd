/**
 * The legal phase transitions of VMIs and VMIMs (KubeVirt `watch/vmi/lifecycle.go`, virt-handler, and
 * `watch/migration/migration.go`). Staying in the same phase is always legal; final phases have no way out.
 *
 * VMI:
 * ```
 *   "" -> Pending -> Scheduling -> Scheduled -> Running -> Succeeded
 *    \        \           \            \           \  \-> Failed
 *     \        \           \            \           \---> Unknown -> Running | Succeeded | Failed
 *      \        \-----------\------------\-> Failed (any non-final phase may fail; Scheduled may also succeed)
 *       \-> WaitingForSync -> Running        (receiver of a decentralized migration)
 * ```
 * VMIM:
 * ```
 *   "" -> Pending -> Scheduling -> Scheduled -> PreparingTarget -> TargetReady -> Running -> Succeeded
 *   every non-final phase -> Failed;  "" -> WaitingForSync | Synchronizing -> Pending (decentralized)
 * ```
 */
import type { MigrationPhase, VmiPhase } from "../constants.ts";

const VMI_TRANSITIONS: Record<VmiPhase, readonly VmiPhase[]> = {
  "": ["Pending", "Scheduling", "WaitingForSync", "Failed"],
  Pending: ["Scheduling", "Failed"],
  Scheduling: ["Scheduled", "Failed"],
  Scheduled: ["Running", "Succeeded", "Failed"],
  Running: ["Succeeded", "Failed", "Unknown"],
  Unknown: ["Running", "Succeeded", "Failed"],
  WaitingForSync: ["Running", "Failed"],
  Succeeded: [],
  Failed: [],
};

const MIGRATION_TRANSITIONS: Record<MigrationPhase, readonly MigrationPhase[]> = {
  "": ["Pending", "WaitingForSync", "Synchronizing", "Failed"],
  Pending: ["Scheduling", "Failed"],
  Scheduling: ["Scheduled", "Failed"],
  Scheduled: ["PreparingTarget", "Failed"],
  PreparingTarget: ["TargetReady", "Failed"],
  TargetReady: ["Running", "Failed"],
  Running: ["Succeeded", "Failed"],
  WaitingForSync: ["Pending", "Failed"],
  Synchronizing: ["Pending", "Failed"],
  Succeeded: [],
  Failed: [],
};

/** The phases a VMI may move to from `from` (not including staying put). */
export function nextVmiPhases(from: VmiPhase): readonly VmiPhase[] {
  return VMI_TRANSITIONS[from] ?? [];
}

/** Whether a VMI may go from `from` to `to` (equal phases are legal; unknown strings are not). */
export function isLegalVmiPhaseTransition(from: string | undefined, to: string | undefined): boolean {
  const f = (from ?? "") as VmiPhase;
  const t = (to ?? "") as VmiPhase;
  if (!(f in VMI_TRANSITIONS) || !(t in VMI_TRANSITIONS)) return false;
  return f === t || VMI_TRANSITIONS[f].includes(t);
}

/** The phases a VMIM may move to from `from`. */
export function nextMigrationPhases(from: MigrationPhase): readonly MigrationPhase[] {
  return MIGRATION_TRANSITIONS[from] ?? [];
}

/** Whether a VMIM may go from `from` to `to`. */
export function isLegalMigrationPhaseTransition(from: string | undefined, to: string | undefined): boolean {
  const f = (from ?? "") as MigrationPhase;
  const t = (to ?? "") as MigrationPhase;
  if (!(f in MIGRATION_TRANSITIONS) || !(t in MIGRATION_TRANSITIONS)) return false;
  return f === t || MIGRATION_TRANSITIONS[f].includes(t);
}

/** A VMIM in Succeeded or Failed is over (and its finalizer may go). */
export function isMigrationFinal(phase: string | undefined): boolean {
  return phase === "Succeeded" || phase === "Failed";
}
