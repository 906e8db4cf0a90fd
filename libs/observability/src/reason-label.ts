/**
 * Failure reasons as bounded label values: free-text reasons (`target connection lost: ECONNRESET`) map onto a
 * small fixed set, so a `reason` label never grows with error messages.
 */

/** The values {@link migrationFailureReason} returns. */
export const MIGRATION_FAILURE_REASONS = [
  "Canceled",
  "Timeout",
  "ConnectionLost",
  "TargetFailed",
  "SourceFailed",
  "Aborted",
  "Other",
] as const;

/** One of {@link MIGRATION_FAILURE_REASONS}. */
export type MigrationFailureReason = (typeof MIGRATION_FAILURE_REASONS)[number];

const RULES: readonly [RegExp, MigrationFailureReason][] = [
  [/cancel/i, "Canceled"],
  [/timeout|timed out|deadline|stuck/i, "Timeout"],
  [/connection|connect|network|socket|econn|epipe|handshake/i, "ConnectionLost"],
  [/target/i, "TargetFailed"],
  [/source/i, "SourceFailed"],
  [/abort/i, "Aborted"],
];

/** The bounded `reason` label of a migration failure reason text. */
export function migrationFailureReason(text: string | undefined): MigrationFailureReason {
  if (!text) return "Other";
  for (const [pattern, reason] of RULES) if (pattern.test(text)) return reason;
  return "Other";
}
