import { describe, expect, it } from "vitest";
import {
  canonicalQuantity,
  parseQuantity,
  QUANTITY_ERRORS,
  Quantity,
  QuantityError,
  tryParseQuantity,
} from "./quantity.ts";

describe("Quantity: canonical form as apimachinery prints it", () => {
  it.each([
    ["0", "0", "DecimalSI"],
    ["64M", "64M", "DecimalSI"],
    ["1Gi", "1Gi", "BinarySI"],
    ["1024Mi", "1Gi", "BinarySI"],
    ["1536Mi", "1536Mi", "BinarySI"],
    ["1.5Gi", "1536Mi", "BinarySI"],
    ["0.5Gi", "512Mi", "BinarySI"],
    ["1.1Ki", "1126400m", "BinarySI"],
    ["0.5Ki", "512", "BinarySI"],
    ["1023Ki", "1023Ki", "BinarySI"],
    ["5Ei", "5Ei", "BinarySI"],
    ["8Ei", "9223372036854775807", "BinarySI"],
    ["100m", "100m", "DecimalSI"],
    ["1000m", "1", "DecimalSI"],
    ["0.1", "100m", "DecimalSI"],
    [".5", "500m", "DecimalSI"],
    ["1000", "1k", "DecimalSI"],
    ["1500k", "1500k", "DecimalSI"],
    ["1.5k", "1500", "DecimalSI"],
    ["1.G", "1G", "DecimalSI"],
    ["1E", "1E", "DecimalSI"],
    ["1000E", "1", "DecimalSI"],
    ["2e3", "2e3", "DecimalExponent"],
    ["1E3", "1e3", "DecimalExponent"],
    ["12e6", "12e6", "DecimalExponent"],
    ["1.5e3", "1500", "DecimalExponent"],
    ["1e-12", "1e-9", "DecimalExponent"],
    ["0.1n", "1n", "DecimalSI"],
    ["-0.1n", "-1n", "DecimalSI"],
    ["-1Gi", "-1Gi", "BinarySI"],
    ["+1Gi", "1Gi", "BinarySI"],
    ["007", "7", "DecimalSI"],
    ["-000", "0", "DecimalSI"],
    ["Gi", "0", "BinarySI"],
    [" 2Gi ", "2Gi", "BinarySI"],
  ])("%j -> %j (%s)", (input, canonical, format) => {
    const q = parseQuantity(input);
    expect(q.toString()).toBe(canonical);
    expect(q.format).toBe(format);
    expect(JSON.stringify({ q })).toBe(`{"q":"${canonical}"}`);
  });

  it.each([
    [1024, "1024"],
    [2.5, "2500m"],
    [1e21, "1e21"],
    [0, "0"],
  ])("the JSON number %j -> %j", (input, canonical) => {
    expect(canonicalQuantity(input)).toBe(canonical);
  });

  it("canonical strings are a fixed point", () => {
    for (const s of ["64M", "1536Mi", "100m", "2e3", "1126400m", "9223372036854775807", "1e-9"]) {
      expect(canonicalQuantity(canonicalQuantity(s))).toBe(canonicalQuantity(s));
    }
  });
});

describe("Quantity: refused input, with apimachinery's messages", () => {
  it.each([
    ["", QUANTITY_ERRORS.formatWrong],
    ["abc", QUANTITY_ERRORS.formatWrong],
    ["1 Gi", QUANTITY_ERRORS.formatWrong],
    ["1Gb", QUANTITY_ERRORS.formatWrong],
    ["1.1.1", QUANTITY_ERRORS.formatWrong],
    ["1Mii", QUANTITY_ERRORS.suffix],
    ["1K", QUANTITY_ERRORS.suffix],
    ["1e", QUANTITY_ERRORS.suffix],
    ["1e+", QUANTITY_ERRORS.suffix],
    ["--1", QUANTITY_ERRORS.suffix],
    ["Ei", QUANTITY_ERRORS.numeric],
    ["-Ei", QUANTITY_ERRORS.numeric],
  ])("%j: %s", (input, message) => {
    expect(() => parseQuantity(input)).toThrow(QuantityError);
    expect(() => parseQuantity(input)).toThrow(message);
    expect(tryParseQuantity(input)).toBeUndefined();
  });

  it("non-finite numbers and non-strings are refused", () => {
    expect(() => parseQuantity(Number.NaN)).toThrow(QuantityError);
    expect(tryParseQuantity({})).toBeUndefined();
    expect(tryParseQuantity(null)).toBeUndefined();
  });

  it("a huge exponent does not blow up (rounds to the nano unit)", () => {
    expect(canonicalQuantity("1e-999999999")).toBe("1e-9");
  });
});

describe("Quantity: values", () => {
  it.each([
    ["64M", 64_000_000n, 64_000_000_000n],
    ["1Gi", 1_073_741_824n, 1_073_741_824_000n],
    ["100m", 1n, 100n],
    ["1.5", 2n, 1500n],
    ["-1.5", -2n, -1500n],
    ["2e3", 2000n, 2_000_000n],
  ])("%s: value %s, milliValue %s", (input, value, milli) => {
    const q = parseQuantity(input);
    expect(q.value()).toBe(value);
    expect(q.milliValue()).toBe(milli);
  });

  it("compares across formats", () => {
    expect(parseQuantity("1Gi").cmp(parseQuantity("1073741824"))).toBe(0);
    expect(parseQuantity("1G").cmp(parseQuantity("1Gi"))).toBe(-1);
    expect(parseQuantity("64Mi").cmp(parseQuantity("64M"))).toBe(1);
    expect(Quantity.of(1073741824n, "BinarySI").toString()).toBe("1Gi");
    expect(parseQuantity("1.5Gi").toNumber()).toBe(1610612736);
  });
});

describe("Quantity: huge exponents stay cheap", () => {
  it("an exponent past int32 is a suffix apimachinery cannot parse", () => {
    expect(() => parseQuantity("1e3000000000")).toThrow(QUANTITY_ERRORS.suffix);
    expect(parseQuantity("1e2147483647").toString()).toBe("10e2147483646");
  });
  it.each([
    ["1e2147483647", "1M", 1],
    ["-1e2147483647", "1M", -1],
    ["1e2147483647", "2e2147483646", 1],
    ["1e400", "99999999999999999999Ei", 1],
    ["0", "1e2147483647", -1],
    ["1000m", "1", 0],
    ["-2", "-1e5", 1],
  ] as const)("cmp(%s, %s) is %i without building 10^exponent", (a, b, want) => {
    const started = performance.now();
    expect(parseQuantity(a).cmp(parseQuantity(b))).toBe(want);
    expect(parseQuantity(b).cmp(parseQuantity(a))).toBe(want === 0 ? 0 : -want);
    expect(performance.now() - started).toBeLessThan(100);
  });
  it("value() is exact up to 10^1000 and saturates beyond", () => {
    expect(parseQuantity("1e400").value()).toBe(10n ** 400n);
    expect(parseQuantity("1e2147483647").value()).toBe(10n ** 1000n);
    expect(parseQuantity("-1e2147483647").milliValue()).toBe(-(10n ** 1000n));
  });
});
