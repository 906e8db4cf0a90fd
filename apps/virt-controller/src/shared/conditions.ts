/**
 * Writing status conditions: set one (keeping lastTransitionTime while its status is unchanged), drop one. Reading
 * them is @kvt/api's `findCondition` / `hasCondition`.
 */
import { type Condition, findCondition } from "@kvt/api";

/**
 * A new list with `cond` in place of any condition of the same type (at the same position: a condition that did
 * not change must not move, or two writers of one list reorder it back and forth forever, each write triggering the
 * other's reconcile), else appended. `lastTransitionTime` is kept when the status did not change, else set to `now`
 * (RFC 3339).
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
