/** Guest physical addresses: a branded `bigint`, so a host offset or a length never passes for one. */

declare const gpaBrand: unique symbol;

/** A guest physical address. Make one with `gpa()`. */
export type Gpa = bigint & { readonly [gpaBrand]: "Gpa" };

/** The largest guest physical address x86-64 can express (52 bits). */
export const MAX_GPA: bigint = (1n << 52n) - 1n;

/** Makes a Gpa from a non-negative integer below 2^52; RangeError otherwise. */
export function gpa(value: bigint | number): Gpa {
  const v = typeof value === "number" ? BigInt(value) : value;
  if (typeof value === "number" && !Number.isSafeInteger(value)) {
    throw new RangeError(`A guest physical address must be a safe integer, got ${value}`);
  }
  if (v < 0n || v > MAX_GPA) throw new RangeError(`A guest physical address must be in [0, 2^52), got ${v}`);
  return v as Gpa;
}
