import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { goBase64Decode, goFormatMap, goJson, goQuote } from "./go-text.ts";

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
