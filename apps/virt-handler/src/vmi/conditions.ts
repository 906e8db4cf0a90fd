/** The handler's VMI conditions: each is wanted (set in place, @kvt/api's semantics) or not (removed). Pure. */
import { type Condition, removeCondition, setCondition as setStatusCondition } from "@kvt/api";

/** A condition as the handler wants it; the transition time is managed by @kvt/api's setCondition. */
export interface DesiredCondition {
  readonly type: string;
  readonly status: "True" | "False" | "Unknown";
  readonly reason?: string;
  readonly message?: string;
}

/** Returns `conditions` with `want` set, or, when `want` is undefined, without the condition of `type`. */
export function setCondition(
  conditions: readonly Condition[],
  type: string,
  want: DesiredCondition | undefined,
  now: string,
): Condition[] {
  if (!want) return removeCondition(conditions, type);
  return setStatusCondition(
    conditions,
    {
      type,
      status: want.status,
      ...(want.reason ? { reason: want.reason } : {}),
      ...(want.message ? { message: want.message } : {}),
    },
    now,
  );
}
