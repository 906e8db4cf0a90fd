/** Parsing of the lines a job inside L1 prints: `KVT_NESTED_CHECK {json}` and `KVT_NESTED_BENCH {json}`. */

/** One check as reported by guest-checks.ts. */
export interface NestedCheck {
  readonly name: string;
  readonly ok: boolean;
  readonly ms: number;
  readonly detail?: string;
}

function jsonAfter<T>(lines: readonly string[], prefix: string): T[] {
  const out: T[] = [];
  for (const line of lines) {
    const at = line.indexOf(`${prefix} `);
    if (at < 0) continue;
    try {
      out.push(JSON.parse(line.slice(at + prefix.length + 1)) as T);
    } catch {
      // A line garbled by interleaved console output is not a result; the check then counts as missing.
    }
  }
  return out;
}

/** The checks reported in `lines`, in order. */
export function parseChecks(lines: readonly string[]): NestedCheck[] {
  return jsonAfter<NestedCheck>(lines, "KVT_NESTED_CHECK");
}

/** The bench samples reported in `lines`. */
export function parseBenchSamples<T>(lines: readonly string[]): T[] {
  return jsonAfter<T>(lines, "KVT_NESTED_BENCH");
}
