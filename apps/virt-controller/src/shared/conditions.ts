/** Status conditions: set one (keeping lastTransitionTime while its status is unchanged), find one, drop one. */
import type { Condition } from "@kvt/api";

/** The condition of `type`, if present. */
export function findCondition(conditions: readonly Condition[] | undefined, type: string): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

/** True when the condition of `type` has status "True". */
export function isTrue(conditions: readonly Condition[] | undefined, type: string): boolean {
  return findCondition(conditions, type)?.status === "True";
}

/**
 * A new list with `cond` in place of any condition of the same type. `lastTransitionTime` is kept when the status
 * did not change, else set to `now` (RFC 3339).
 */
export function setCondition(conditions: readonly Condition[] | undefined, cond: Condition, now: string): Condition[] {
  const old = findCondition(conditions, cond.type);
  const next: Condition = {
    ...cond,
    lastTransitionTime: old && old.status === cond.status ? (old.lastTransitionTime ?? now) : now,
  };
  const out = (conditions ?? []).filter((c) => c.type !== cond.type);
  out.push(next);
  return out;
}

/** A new list without conditions of `type`. */
export function removeCondition(conditions: readonly Condition[] | undefined, type: string): Condition[] {
  return (conditions ?? []).filter((c) => c.type !== type);
}
