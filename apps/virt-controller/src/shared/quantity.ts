/**
 * Kubernetes resource quantities (`128Mi`, `1G`, `0.5`, `100m`) to numbers. Written here because @kvt/api's barrel
 * does not export a quantity parser yet; switch to it once it does.
 */

const SUFFIX: Record<string, number> = {
  "": 1,
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
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
};

/** The value of `q` (bytes for memory, cores for CPU); throws a TypeError on a malformed quantity. */
export function parseQuantity(q: string | number): number {
  if (typeof q === "number") return q;
  const m = /^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$/.exec(q.trim());
  if (!m) throw new TypeError(`Cannot parse quantity "${q}"`);
  const base = Number(m[1]);
  if (m[2]) return base * 10 ** Number(m[2].slice(1));
  return base * SUFFIX[m[3] ?? ""];
}

/** Bytes as a binary quantity string the API accepts (`"1073741824"` becomes `"1Gi"`, odd values stay plain). */
export function formatBytes(bytes: number): string {
  const n = Math.ceil(bytes);
  for (const [suffix, size] of [
    ["Gi", 2 ** 30],
    ["Mi", 2 ** 20],
    ["Ki", 2 ** 10],
  ] as const) {
    if (n % size === 0) return `${n / size}${suffix}`;
  }
  return String(n);
}
