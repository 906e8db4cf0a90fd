/**
 * Which trace a virt-handler reconcile of a VMI joins: while the VMI migrates (and shortly after, to cover the
 * finalizing reconciles), the migration's trace from the VMI's `kubevirt.io/migration-traceparent` annotation
 * (set by virt-controller at the handoff); while the VMI starts, the trace of the request that created it (its
 * `kubevirt.io/traceparent`), if any; otherwise none (a root span per reconcile). The
 * launcher calls made inside the reconcile carry it on in their `traceparent` header.
 */
import { ANNOTATION, type VirtualMachineInstance } from "@kvt/api";
import { contextFromTraceparent } from "@kvt/observability";
import type { Context } from "@opentelemetry/api";

const STARTING_PHASES: ReadonlySet<string> = new Set(["", "Pending", "Scheduling", "Scheduled"]);

/** How long after a migration ended its VMI's reconciles still join its trace. */
export const MIGRATION_TRACE_GRACE_MS = 30_000;

/** The parent context of a reconcile of `vmi`; undefined when it joins no trace. */
export function reconcileParent(vmi: VirtualMachineInstance | undefined, now = Date.now()): Context | undefined {
  const annotations = vmi?.metadata?.annotations;
  const state = vmi?.status?.migrationState;
  const migrationTrace = annotations?.[ANNOTATION.migrationTraceparent];
  if (migrationTrace && state) {
    const ended = state.endTimestamp ? Date.parse(state.endTimestamp) : Number.NaN;
    if (Number.isNaN(ended) || now - ended < MIGRATION_TRACE_GRACE_MS) return contextFromTraceparent(migrationTrace);
  }
  const created = annotations?.[ANNOTATION.traceparent];
  const starting = STARTING_PHASES.has(vmi?.status?.phase ?? "");
  return created && starting ? contextFromTraceparent(created) : undefined;
}
