/** Setting and clearing VMI conditions without churning lastTransitionTime (pure). */
import type { Condition } from "@kvt/api";

/** A condition as the handler wants it; the transition time is managed here. */
export interface DesiredCondition {
  readonly type: string;
  readonly status: "True" | "False" | "Unknown";
  readonly reason?: string;
  readonly message?: string;
}

/**
 * Returns `conditions` with `want` set (or, when `want` is undefined, the condition of `type` removed). The
 * transition time moves only when the status changes, as Kubernetes condition semantics require; a condition that
 * exists keeps its place in the list.
 */
export function setCondition(
  conditions: readonly Condition[],
  type: string,
  want: DesiredCondition | undefined,
  now: string,
): Condition[] {
  const old = conditions.find((c) => c.type === type);
  const rest = conditions.filter((c) => c.type !== type);
  if (!want) return rest;
  const next: Condition = {
    type,
    status: want.status,
    lastTransitionTime: old && old.status === want.status ? (old.lastTransitionTime ?? now) : now,
    ...(want.reason ? { reason: want.reason } : {}),
    ...(want.message ? { message: want.message } : {}),
  };
  // In place, not moved to the end: virt-controller sets its own conditions in place too, and a writer that reorders
  // the list makes every write look like a change to the other side (an endless write loop).
  return old ? conditions.flatMap((c) => (c === old ? [next] : c.type === type ? [] : [c])) : [...rest, next];
}

/** The condition of `type`, if present. */
export function findCondition(conditions: readonly Condition[] | undefined, type: string): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}
