/**
 * What a reconcile returns: done, or come back later. Failures are thrown (`SyncError`, `TerminalError`, any
 * Error) and the runner decides whether to retry.
 */

import type { ObjectKey } from "@kvt/api";
import type { Span } from "@opentelemetry/api";
import type { Logger } from "pino";

/** The outcome of a successful reconcile. */
export interface Result {
  /** Reconcile the key again after this many ms (an expected wait, not a failure). */
  readonly requeueAfterMs?: number;
}

/** Finished; nothing to do until the next change. */
export function done(): Result {
  return {};
}

/** Finished for now; look again after `ms`. */
export function requeueAfter(ms: number): Result {
  return { requeueAfterMs: ms };
}

/** Per-reconcile context the runner hands in. */
export interface ReconcileContext {
  /** Logger carrying `controller`, `key` and `reconcileId`. */
  readonly logger: Logger;
  readonly reconcileId: string;
  /** The reconcile's span (child spans and attributes go here). */
  readonly span: Span;
}

/** The business logic of one controller. */
export interface Reconciler {
  reconcile(key: ObjectKey, ctx: ReconcileContext): Promise<Result>;
}
