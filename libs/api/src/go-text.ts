/**
 * Text as Go's standard library writes it, where KubeVirt's and the kubelet's output bytes depend on it:
 * `encoding/json` Marshal (HTML-safe escapes), `%q` (strconv.Quote), `encoding/base64` StdEncoding decoding, and
 * time.Duration's text (metav1.Duration fields such as `5m` or `24h0m0s`).
 */

/**
 * JSON as Go's json.Marshal writes it: struct fields in the order given (plain objects keep insertion order, an
 * undefined field is left out as `omitempty` does), a Map as a Go map (keys sorted by bytes), and the HTML-safe
 * escapes Go adds (<, >, & and U+2028/U+2029 as \u00XX / \u20XX).
 */
export function goJson(value: unknown): string {
  return marshal(value).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

function marshal(value: unknown): string {
  if (value instanceof Map) {
    const keys = [...(value as Map<string, unknown>).keys()].sort((a, b) =>
      Buffer.compare(Buffer.from(a), Buffer.from(b)),
    );
    return `{${keys.map((k) => `${JSON.stringify(k)}:${marshal(value.get(k))}`).join(",")}}`;
  }
  if (Array.isArray(value)) return `[${value.map(marshal).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const fields = Object.entries(value).filter(([, v]) => v !== undefined);
    return `{${fields.map(([k, v]) => `${JSON.stringify(k)}:${marshal(v)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

const NAMED_ESCAPES: Readonly<Record<string, string>> = {
  "\u0007": "\\a",
  "\b": "\\b",
  "\f": "\\f",
  "\n": "\\n",
  "\r": "\\r",
  "\t": "\\t",
  "\v": "\\v",
  '"': '\\"',
  "\\": "\\\\",
};

/** Go's strconv.IsPrint: letters, marks, numbers, punctuation, symbols and the ASCII space. */
const PRINTABLE = /^[\p{L}\p{M}\p{N}\p{P}\p{S} ]$/u;

/** Whether Go's strconv.IsPrint holds for the one character `ch`. */
export function goIsPrint(ch: string): boolean {
  return PRINTABLE.test(ch);
}

/**
 * Go's %q of a string (strconv.Quote): double-quoted, named escapes, \xNN for ASCII controls, \uNNNN or \UNNNNNNNN
 * for characters strconv.IsPrint refuses. testdata/go-quote holds Go's own output for a table of inputs.
 */
export function goQuote(text: string): string {
  let out = '"';
  for (const ch of text) {
    const code = ch.codePointAt(0) ?? 0;
    if (Object.hasOwn(NAMED_ESCAPES, ch)) out += NAMED_ESCAPES[ch];
    else if (code < 0x20 || code === 0x7f) out += `\\x${code.toString(16).padStart(2, "0")}`;
    else if (PRINTABLE.test(ch)) out += ch;
    else if (code > 0xffff) out += `\\U${code.toString(16).padStart(8, "0")}`;
    else out += `\\u${code.toString(16).padStart(4, "0")}`;
  }
  return `${out}"`;
}

/**
 * The kubelet's fieldpath.FormatMap (the downward API's rendering of labels and annotations): `key="value"` lines
 * sorted by key bytes as Go's sort.Strings, values as %q, no final newline.
 */
export function goFormatMap(map: Readonly<Record<string, string>> | undefined): string {
  const keys = Object.keys(map ?? {}).sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  return keys.map((k) => `${k}=${goQuote(map![k])}`).join("\n");
}

/**
 * Go's base64.StdEncoding.DecodeString: the padded standard alphabet; CR and LF anywhere are ignored.
 * Returns undefined for anything Go would refuse.
 */
export function goBase64Decode(text: string): Buffer | undefined {
  const clean = text.replace(/[\r\n]/g, "");
  if (clean.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(clean)) return undefined;
  // Like StdEncoding (not Strict()), non-zero bits in the last character's padding are ignored.
  return Buffer.from(clean, "base64");
}

const DURATION_UNIT_MS: Readonly<Record<string, number>> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/** A Go duration (`metav1.Duration`: "5m", "1h30m", "90s") in milliseconds; undefined when it does not parse. */
export function parseGoDuration(text: string): number | undefined {
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/gy;
  let total = 0;
  let matched = 0;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    total += Number(m[1]) * (DURATION_UNIT_MS[m[2] ?? ""] ?? 0);
    matched = re.lastIndex;
  }
  return matched === text.length && text !== "" ? total : text === "0" ? 0 : undefined;
}

/** A number as Go prints a duration's fraction: no trailing zeros, at most nanosecond precision. */
function fraction(value: number, digits: number): string {
  return value.toFixed(digits).replace(/\.?0+$/, "");
}

/**
 * Go's time.Duration.String() of `ms` milliseconds (what metav1.Duration marshals to): `24h0m0s`, `1m30s`,
 * `1.5s`, `250ms`, `0s`.
 */
export function formatGoDuration(ms: number): string {
  if (ms < 0) return `-${formatGoDuration(-ms)}`;
  if (ms === 0) return "0s";
  if (ms < 1000) return `${fraction(ms, 6)}ms`;
  const hours = Math.floor(ms / 3_600_000);
  const minutes = Math.floor((ms % 3_600_000) / 60_000);
  const seconds = `${fraction((ms % 60_000) / 1000, 9)}s`;
  if (hours > 0) return `${hours}h${minutes}m${seconds}`;
  if (minutes > 0) return `${minutes}m${seconds}`;
  return seconds;
}
