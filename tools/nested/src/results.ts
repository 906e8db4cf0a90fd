/** Parsing of the lines a job inside L1 prints: `KVT_NESTED_CHECK {json}` and `KVT_NESTED_BENCH {json}`. */

import type { CheckResult, SuiteTests } from "./check-runner.ts";

/** One check as reported by guest-checks.ts. */
export type NestedCheck = CheckResult;

/** What the lane adds to `npm test`'s `N passed, N failed, N skipped`, with the failures and skips named. */
export type LaneTally = SuiteTests;

/**
 * Counts the lane's checks as tests: a check is one test, a test file run as one check counts its tests one by one
 * (a file none of whose tests ran is a failure: it proved nothing). A job that did not finish (`unfinished`: why)
 * or reported no check adds a failure named "lane".
 */
export function laneTally(checks: readonly NestedCheck[], unfinished?: string): LaneTally {
  let passed = 0;
  const failedNames: string[] = [];
  const skippedNames: string[] = [];
  for (const c of checks) {
    if (!c.tests) {
      if (c.ok) passed++;
      else failedNames.push(`${c.name}: ${c.detail ?? "failed"}`);
      continue;
    }
    passed += c.tests.passed;
    failedNames.push(...c.tests.failedNames.map((n) => `${c.name}: ${n}`));
    skippedNames.push(...c.tests.skippedNames.map((n) => `${c.name}: ${n}`));
    if (c.tests.failed === 0 && !c.ok) failedNames.push(`${c.name}: ${c.detail ?? "no test ran"}`);
  }
  if (unfinished) failedNames.push(`lane: ${unfinished}`);
  else if (checks.length === 0) failedNames.push("lane: the job reported no check");
  return { passed, failed: failedNames.length, skipped: skippedNames.length, failedNames, skippedNames };
}

/** The name after the last line that starts with `prefix` (e.g. the check or group running when L1 stopped). */
export function lastNamed(lines: readonly string[], prefix: string): string | undefined {
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i] ?? "";
    if (line.startsWith(prefix)) return line.slice(prefix.length).trim();
  }
  return undefined;
}

/** The lines before the last one equal to `marker` (all of them when there is none). */
export function linesBefore(lines: readonly string[], marker: string): string[] {
  const at = lines.lastIndexOf(marker);
  return at < 0 ? [...lines] : lines.slice(0, at);
}

/** True when the job printed its end line (`KVT_NESTED_DONE`): every check it meant to run has reported. */
export function jobFinished(lines: readonly string[]): boolean {
  return lines.some((l) => l.includes("KVT_NESTED_DONE"));
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
