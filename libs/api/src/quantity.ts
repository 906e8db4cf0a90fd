/**
 * Kubernetes `resource.Quantity`, parsed and printed exactly as apimachinery does (`api/resource/quantity.go`):
 *
 * ```
 *   "<sign><digits>[.<digits>]<suffix>"
 *        suffix  binary SI   Ki Mi Gi Ti Pi Ei           (x 2^10 .. 2^60)         -> Format "BinarySI"
 *                decimal SI  n u m "" k M G T P E        (x 10^-9 .. 10^18)       -> Format "DecimalSI"
 *                exponent    e<int> / E<int>            (x 10^int)               -> Format "DecimalExponent"
 *   value  = unscaled x 10^scale (exact, bigint), rounded away from zero to 1n; BinarySI capped at 2^63-1
 *   String = canonical form in the parsed format: "1536Mi", "1500", "100m", "2e3"; BinarySI values below 1024
 *            or not whole fall back to DecimalSI; DecimalSI/Exponent exponents are multiples of 3.
 * ```
 * Quirks kept on purpose (a manifest must mean the same here as on Kubernetes): a bare suffix ("Gi", "M") parses as
 * zero, and a DecimalSI value at or beyond 1000E prints without a suffix, as apimachinery does.
 */

/** How a quantity is printed. */
export type QuantityFormat = "BinarySI" | "DecimalSI" | "DecimalExponent";

const SPLIT_RE = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$";

/** apimachinery's parse errors, with their exact messages. */
export const QUANTITY_ERRORS = {
  formatWrong: `quantities must match the regular expression '${SPLIT_RE}'`,
  numeric: "unable to parse numeric part of quantity",
  suffix: "unable to parse quantity's suffix",
} as const;

/** A quantity string that Kubernetes would refuse; `message` is apimachinery's. */
export class QuantityError extends Error {
  override readonly name = "QuantityError";
  /** The refused input. */
  readonly input: string;
  constructor(input: string, message: string) {
    super(message);
    this.input = input;
  }
}

const DECIMAL_SUFFIXES: Record<string, number> = { n: -9, u: -6, m: -3, "": 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };
const BINARY_SUFFIXES: Record<string, number> = { Ki: 10, Mi: 20, Ti: 40, Gi: 30, Pi: 50, Ei: 60 };
const MAX_INT64 = (1n << 63n) - 1n;
const NANO = -9;
const MAX_EXPONENT = 2 ** 31 - 1;
/**
 * Scaled values are exact up to this many digits and saturate beyond (10^1000, with the sign): an exact 10^(2^31)
 * would take minutes and gigabytes to build, and no resource means anything past int64 anyway.
 */
const MAX_SCALED_DIGITS = 1000;
const DIGITS = "0123456789";
const SUFFIX_CHARS = "eEinumkKMGTP";

interface Scanned {
  positive: boolean;
  num: string;
  denom: string;
  suffix: string;
  /** The numeric text (sign, digits, point) apimachinery hands to inf.Dec on its slow path. */
  value: string;
}

function takeWhile(s: string, from: number, chars: string): number {
  let i = from;
  while (i < s.length && chars.includes(s[i])) i++;
  return i;
}

/** apimachinery's `parseQuantityString`, a scanner more permissive than the regex it quotes. */
function scan(str: string): Scanned {
  let pos = 0;
  let positive = true;
  if (str[0] === "-" || str[0] === "+") {
    positive = str[0] === "+";
    pos++;
  }
  pos = takeWhile(str, pos, "0");
  if (pos >= str.length) return { positive, num: "0", denom: "", suffix: "", value: "0" };
  const numEnd = takeWhile(str, pos, DIGITS);
  const num = str.slice(pos, numEnd) || "0";
  pos = numEnd;
  let denom = "";
  if (str[pos] === ".") {
    const denomEnd = takeWhile(str, pos + 1, DIGITS);
    denom = str.slice(pos + 1, denomEnd);
    pos = denomEnd;
  }
  const value = str.slice(0, pos);
  const suffixStart = pos;
  pos = takeWhile(str, pos, SUFFIX_CHARS);
  if (str[pos] === "-" || str[pos] === "+") pos++;
  pos = takeWhile(str, pos, DIGITS);
  if (pos < str.length) throw new QuantityError(str, QUANTITY_ERRORS.formatWrong);
  return { positive, num, denom, suffix: str.slice(suffixStart), value };
}

function interpretSuffix(s: string): { base: 2 | 10; exponent: number; format: QuantityFormat } | undefined {
  const dec = DECIMAL_SUFFIXES[s];
  if (dec !== undefined) return { base: 10, exponent: dec, format: "DecimalSI" };
  const bin = BINARY_SUFFIXES[s];
  if (bin !== undefined) return { base: 2, exponent: bin, format: "BinarySI" };
  if (s.length > 1 && (s[0] === "e" || s[0] === "E") && /^[+-]?[0-9]+$/.test(s.slice(1))) {
    const exponent = Number(s.slice(1));
    // The exponent is an int32 in apimachinery (inf.Scale); beyond it the suffix does not parse.
    if (Number.isSafeInteger(exponent) && Math.abs(exponent) <= MAX_EXPONENT)
      return { base: 10, exponent, format: "DecimalExponent" };
  }
  return undefined;
}

const pow10 = (n: number): bigint => 10n ** BigInt(n);
const absBig = (v: bigint): bigint => (v < 0n ? -v : v);

/** The number of decimal digits of |v| (1 for zero). */
const digitCount = (v: bigint): number => absBig(v).toString().length;

/** unscaled x 10^scale rounded away from zero to `target` scale (saturating past MAX_SCALED_DIGITS digits). */
function roundUpTo(unscaled: bigint, scale: number, target: number): { unscaled: bigint; exact: boolean } {
  if (scale >= target) {
    if (unscaled !== 0n && digitCount(unscaled) + scale - target > MAX_SCALED_DIGITS)
      return { unscaled: (unscaled < 0n ? -1n : 1n) * pow10(MAX_SCALED_DIGITS), exact: false };
    return { unscaled: unscaled * pow10(scale - target), exact: true };
  }
  const drop = target - scale;
  const sign = unscaled < 0n ? -1n : 1n;
  const abs = absBig(unscaled);
  // Beyond the number's own digits the result is the rounding unit: no need to build a huge power of ten.
  if (drop > abs.toString().length) return { unscaled: abs === 0n ? 0n : sign, exact: abs === 0n };
  const div = pow10(drop);
  const q = abs / div;
  const exact = q * div === abs;
  return { unscaled: sign * (exact ? q : q + 1n), exact };
}

/** An exact Kubernetes quantity: `unscaled x 10^scale`, printed in `format`. Immutable. */
export class Quantity {
  /** The digits, with sign. */
  readonly unscaled: bigint;
  /** Power of ten applied to `unscaled` (>= -9 after parsing). */
  readonly scale: number;
  /** The format `toString()` uses. */
  readonly format: QuantityFormat;

  constructor(unscaled: bigint, scale: number, format: QuantityFormat) {
    this.unscaled = unscaled;
    this.scale = scale;
    this.format = format;
  }

  /** A whole number of `format` units, e.g. `Quantity.of(1073741824n, "BinarySI")` prints "1Gi". */
  static of(value: bigint | number, format: QuantityFormat = "DecimalSI"): Quantity {
    return new Quantity(BigInt(value), 0, format);
  }

  /** Parses a string (or a JSON number) as `resource.ParseQuantity` does; throws QuantityError. */
  static parse(input: string | number): Quantity {
    if (typeof input === "number") {
      if (!Number.isFinite(input)) throw new QuantityError(String(input), QUANTITY_ERRORS.formatWrong);
      return Quantity.parse(String(input));
    }
    // UnmarshalJSON trims spaces before parsing.
    const str = input.trim();
    if (str.length === 0) throw new QuantityError(input, QUANTITY_ERRORS.formatWrong);
    if (str === "0") return new Quantity(0n, 0, "DecimalSI");
    const s = scan(str);
    const suffix = interpretSuffix(s.suffix);
    if (!suffix) throw new QuantityError(input, QUANTITY_ERRORS.suffix);
    let format = suffix.format;
    // apimachinery's slow path (inf.Dec) refuses a numeric part with no digits, e.g. "Ei" or "-Ei".
    const digits = s.num.length + s.denom.length;
    const fast =
      suffix.base === 2
        ? s.denom.length === 0 && 15 - s.num.length - Math.trunc((suffix.exponent * 3) / 10) - 1 >= 0
        : 18 - digits >= 0 && suffix.exponent - s.denom.length >= NANO;
    if (!fast && !/[0-9]/.test(s.value)) throw new QuantityError(input, QUANTITY_ERRORS.numeric);
    let unscaled = BigInt(s.num + s.denom) * (s.positive ? 1n : -1n);
    let scale = -s.denom.length;
    if (suffix.base === 10) scale += suffix.exponent;
    else unscaled *= 1n << BigInt(suffix.exponent);
    if (scale < NANO) {
      unscaled = roundUpTo(unscaled, scale, NANO).unscaled;
      scale = NANO;
    }
    if (format === "BinarySI") {
      const abs = new Quantity(absBig(unscaled), scale, format);
      if (abs.cmp(Quantity.of(MAX_INT64)) > 0) {
        unscaled = unscaled < 0n ? -MAX_INT64 : MAX_INT64;
        scale = 0;
      }
      if (unscaled !== 0n && abs.cmp(Quantity.of(1)) < 0) format = "DecimalSI";
    }
    return new Quantity(unscaled, scale, format);
  }

  /** -1, 0 or 1 as this is less than, equal to or greater than `other`. */
  cmp(other: Quantity): -1 | 0 | 1 {
    const sa = this.unscaled < 0n ? -1 : this.unscaled > 0n ? 1 : 0;
    const sb = other.unscaled < 0n ? -1 : other.unscaled > 0n ? 1 : 0;
    if (sa !== sb || sa === 0) return sa < sb ? -1 : sa > sb ? 1 : 0;
    // Orders of magnitude apart: decided without building 10^(scale difference), which may be 10^(2^31).
    const ma = digitCount(this.unscaled) + this.scale;
    const mb = digitCount(other.unscaled) + other.scale;
    if (ma !== mb) return (ma > mb ? 1 : -1) * sa > 0 ? 1 : -1;
    const s = Math.min(this.scale, other.scale);
    const a = this.unscaled * pow10(this.scale - s);
    const b = other.unscaled * pow10(other.scale - s);
    return a < b ? -1 : a > b ? 1 : 0;
  }

  /** The value at `scale` (0 = units, -3 = milli), rounded up away from zero (`ScaledValue`); saturates at ±10^1000. */
  scaledValue(scale: number): bigint {
    return roundUpTo(this.unscaled, this.scale, scale).unscaled;
  }

  /** The value in units, rounded up away from zero (`Value()`): bytes for memory, cores for cpu. */
  value(): bigint {
    return this.scaledValue(0);
  }

  /** The value in thousandths, rounded up (`MilliValue()`): millicores for cpu. */
  milliValue(): bigint {
    return this.scaledValue(-3);
  }

  /** The value as a float (may lose precision for very large or very precise values). */
  toNumber(): number {
    return Number(this.unscaled) * 10 ** this.scale;
  }

  /** Whether the value is zero. */
  isZero(): boolean {
    return this.unscaled === 0n;
  }

  /** The canonical string (`Quantity.String()`), e.g. "64M", "1Gi", "100m", "2e3". */
  toString(): string {
    if (this.unscaled === 0n) return "0";
    let format = this.format;
    if (format === "BinarySI") {
      const small = this.cmp(Quantity.of(-1024)) > 0 && this.cmp(Quantity.of(1024)) < 0;
      if (small || !roundUpTo(this.unscaled, this.scale, 0).exact) format = "DecimalSI";
    }
    if (format === "BinarySI") {
      let amount = roundUpTo(this.unscaled, this.scale, 0).unscaled;
      let exp = 0;
      while (amount % 1024n === 0n && exp < 6) {
        amount /= 1024n;
        exp++;
      }
      // Past Ei apimachinery has no suffix, so it keeps dividing and prints the bare number; never reached after the cap.
      return `${amount}${["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][exp]}`;
    }
    let amount = this.unscaled;
    let exponent = this.scale;
    while (amount % 10n === 0n) {
      amount /= 10n;
      exponent++;
    }
    while (exponent % 3 !== 0) {
      amount *= 10n;
      exponent--;
    }
    if (format === "DecimalExponent") return exponent === 0 ? `${amount}` : `${amount}e${exponent}`;
    const suffix = Object.entries(DECIMAL_SUFFIXES).find(([, e]) => e === exponent)?.[0] ?? "";
    return `${amount}${suffix}`;
  }

  /** JSON form: the canonical string, as apimachinery marshals it. */
  toJSON(): string {
    return this.toString();
  }
}

/** Parses a quantity (string or number); throws QuantityError with apimachinery's message. */
export function parseQuantity(input: string | number): Quantity {
  return Quantity.parse(input);
}

/** Parses a quantity, or returns undefined when Kubernetes would refuse it. */
export function tryParseQuantity(input: unknown): Quantity | undefined {
  if (typeof input !== "string" && typeof input !== "number") return undefined;
  try {
    return Quantity.parse(input);
  } catch (err) {
    // Only a bad quantity means "undefined"; anything else is a bug and must surface.
    if (err instanceof QuantityError) return undefined;
    throw err;
  }
}

/** The canonical form of a quantity string, e.g. "1024Mi" -> "1Gi", "0.5" -> "500m". */
export function canonicalQuantity(input: string | number): string {
  return Quantity.parse(input).toString();
}
