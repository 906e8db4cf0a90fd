import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { formatGoDuration, goBase64Decode, goFormatMap, goJson, goQuote, parseGoDuration } from "./go-text.ts";

/** Pairs [input, strconv.Quote(input)] printed by Go itself: testdata/go-quote/main.go (`go run main.go < in.json`). */
const goOutput = JSON.parse(readFileSync(new URL("./testdata/go-quote/expected.json", import.meta.url), "utf8")) as [
  string,
  string,
][];

describe("goQuote", () => {
  it.each(goOutput)("quotes %j as Go's strconv.Quote does", (input, quoted) => {
    expect(goQuote(input)).toBe(quoted);
  });

  it("covers named escapes, ASCII controls, BMP and astral non-printables in the Go table", () => {
    const all = goOutput.map(([, q]) => q).join("");
    for (const form of ["\\a", "\\x00", "\\u00a0", "\\U000e0001", "😀"]) expect(all).toContain(form);
  });
});

describe("goFormatMap", () => {
  it("sorts keys by bytes and quotes values, with no final newline", () => {
    expect(goFormatMap({ b: "2", a: 'x"y', "\u00e9": "1", z: "\n" })).toBe('a="x\\"y"\nb="2"\nz="\\n"\n\u00e9="1"');
    expect(goFormatMap(undefined)).toBe("");
  });
});

describe("goJson", () => {
  it("writes HTML-safe escapes and sorted Map keys as Go's json.Marshal", () => {
    expect(
      goJson({
        b: "<&>",
        a: undefined,
        m: new Map([
          ["z", 1],
          ["a", 2],
        ]),
      }),
    ).toBe('{"b":"\\u003c\\u0026\\u003e","m":{"a":2,"z":1}}');
  });
});

describe("goBase64Decode", () => {
  it("ignores CR/LF and refuses what Go's StdEncoding refuses", () => {
    expect(goBase64Decode("aGVs\nbG8=")?.toString()).toBe("hello");
    expect(goBase64Decode("aGVsbG8")).toBeUndefined();
    expect(goBase64Decode("a$==")).toBeUndefined();
  });
});

describe("Go durations", () => {
  it.each([
    ["5m", 300_000],
    ["1h30m", 5_400_000],
    ["1.5s", 1500],
    ["250ms", 250],
    ["0", 0],
    ["5 minutes", undefined],
    ["", undefined],
  ])("parseGoDuration(%j) = %j", (text, ms) => {
    expect(parseGoDuration(text)).toBe(ms);
  });

  it.each([
    [86_400_000, "24h0m0s"],
    [604_800_000, "168h0m0s"],
    [17_280_000, "4h48m0s"],
    [120_960_000, "33h36m0s"],
    [90_000, "1m30s"],
    [1500, "1.5s"],
    [250, "250ms"],
    [0, "0s"],
    [-60_000, "-1m0s"],
  ])("formatGoDuration(%j) = %j, as time.Duration.String()", (ms, text) => {
    expect(formatGoDuration(ms)).toBe(text);
    expect(parseGoDuration(text.replace(/^-/, ""))).toBe(Math.abs(ms));
  });
});
