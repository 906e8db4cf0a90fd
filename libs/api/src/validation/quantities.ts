/* eslint-disable @typescript-eslint/restrict-template-expressions -- FieldPath prints itself (toString) exactly as KubeVirt formats paths into its messages. */
/** Reading quantities out of a spec for validation: a bad string becomes a cause, never an exception. */
import { Quantity, QuantityError } from "../quantity.ts";
import type { ValidationCause } from "../types.ts";
import { CAUSE_TYPE, cause, type FieldPath } from "./causes.ts";

/** The parsed quantity at `raw` (undefined when absent); pushes a cause when it does not parse. */
export function readQuantity(raw: unknown, field: FieldPath, causes: ValidationCause[]): Quantity | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (typeof raw !== "string" && typeof raw !== "number") {
    causes.push(
      cause(CAUSE_TYPE.invalid, `${field} '${JSON.stringify(raw)}': quantities must be a string or a number`, field),
    );
    return undefined;
  }
  try {
    return Quantity.parse(raw);
  } catch (err) {
    if (!(err instanceof QuantityError)) throw err;
    causes.push(cause(CAUSE_TYPE.invalid, `${field} '${raw}': ${err.message}`, field));
    return undefined;
  }
}

/** Like `readQuantity` but silent (for values already reported elsewhere); zero when absent or bad. */
export function quantityOrZero(raw: unknown): Quantity {
  if (typeof raw !== "string" && typeof raw !== "number") return Quantity.of(0);
  try {
    return Quantity.parse(raw);
  } catch {
    // Reported by readQuantity on the same field; here a bad value simply counts as unset.
    return Quantity.of(0);
  }
}
