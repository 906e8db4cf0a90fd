/** Kubernetes resource quantities (`64M`, `1Gi`, `500m`, `2`) as numbers, for memory and CPU in a VMI spec. */

const SUFFIX: Record<string, number> = {
  "": 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
  m: 1e-3,
};

/** Parses a quantity; returns undefined when `value` is not one (the caller names the field in its error). */
export function parseQuantity(value: string | number | undefined): number | undefined {
  if (typeof value === "number") return Number.isFinite(value) && value >= 0 ? value : undefined;
  if (typeof value !== "string") return undefined;
  const m = /^\+?(\d+(?:\.\d*)?|\.\d+)(?:[eE]([+-]?\d+))?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$/.exec(value.trim());
  if (!m) return undefined;
  const base = Number(m[1]) * 10 ** Number(m[2] ?? 0);
  const result = base * (SUFFIX[m[3] ?? ""] ?? 1);
  return Number.isFinite(result) ? result : undefined;
}
