/**
 * @kvt/migration: live-migration control for the native VMM. The convergence policy (downtime budget, auto-converge,
 * KubeVirt's completion and progress timeouts), the source runner with progress events and downtime accounting, and
 * the target's listener. The bytes move in native code through @kvt/vmm's migration streams.
 */

/** The outage a client saw across a move: the longest silence between its probe's replies. */
export { longestGap } from "./outage.ts";
/** The pure convergence policy (timeouts arrive resolved: @kvt/api's acceptableCompletionTimeSeconds). */
export {
  ConvergencePolicy,
  type Decision,
  type RoundSample,
  THROTTLE_INCREMENT,
  THROTTLE_INITIAL,
  THROTTLE_MAX,
} from "./policy.ts";
/** The source side: run a migration, cancel it, observe progress, read downtime and totals. */
export { type MigrationResult, OutgoingMigration, type OutgoingOptions } from "./source.ts";
/** The target side: listen with a one-time secret and wait for the guest. */
export { type IncomingMigration, type IncomingOptions, prepareIncoming } from "./target.ts";
/** The engine's own types (also `@kvt/migration/types`, which loads nothing): target, options, progress, outcome. */
export type {
  MigrationOptions,
  MigrationOutcome,
  MigrationProgress,
  MigrationTarget,
  MigrationTlsIdentity,
} from "./types.ts";
/** The wire format's frame codec (diagnostics; the native stream is the implementation). */
export { type DecodedFrame, decodeFrames, WIRE_COMMANDS } from "./wire.ts";
