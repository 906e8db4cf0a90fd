/**
 * Status conditions, read and written as Kubernetes does: one condition per type; `lastTransitionTime` moves only
 * when the status changes. virt-controller and virt-handler write the same VMI condition list, so a condition that did
 * not change keeps its place: a writer that reordered the list would make every write look like a change to the
 * other side, each write triggering the other's reconcile, forever.
 */
import type { Condition } from "../types.ts";

/** The condition of `type` on an object's status, if any. */
export function findCondition(conditions: readonly Condition[] | undefined, type: string): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

/** Whether the condition of `type` has `status` ("True" by default). */
export function hasCondition(conditions: readonly Condition[] | undefined, type: string, status = "True"): boolean {
  return findCondition(conditions, type)?.status === status;
}

/**
 * A new list with `cond` in place of any condition of the same type (at its position), else appended.
 * `lastTransitionTime` is kept while the status is unchanged, else set to `now` (RFC 3339).
 */
export function setCondition(conditions: readonly Condition[] | undefined, cond: Condition, now: string): Condition[] {
  const old = findCondition(conditions, cond.type);
  const next: Condition = {
    ...cond,
    lastTransitionTime: old && old.status === cond.status ? (old.lastTransitionTime ?? now) : now,
  };
  if (!old) return [...(conditions ?? []), next];
  return (conditions ?? []).filter((c) => c === old || c.type !== cond.type).map((c) => (c === old ? next : c));
}

/** A new list without conditions of `type`. */
export function removeCondition(conditions: readonly Condition[] | undefined, type: string): Condition[] {
  return (conditions ?? []).filter((c) => c.type !== type);
}
