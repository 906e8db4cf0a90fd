/** Reads vitest JSON reports (`<project>/.reports/*.json`) into tallies. */
import { existsSync, readFileSync } from "node:fs";
import type { Tally } from "./steps.ts";

interface VitestJson {
  testResults?: {
    name?: string;
    message?: string;
    assertionResults?: { fullName?: string; status?: string; failureMessages?: string[] }[];
  }[];
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  numTodoTests: number;
  numFailedTestSuites?: number;
  success?: boolean;
}

/** A tally with what failed named, so the end of `npm test`'s output says which tests to look at. */
export interface NamedTally extends Tally {
  readonly failedNames: readonly string[];
}

/**
 * The tally of one vitest JSON report, its failures named `<file>: <test>` (a file that failed to load is named with
 * its first message line); a missing or unreadable report (the run crashed before writing it) counts as one failure
 * so it can never pass unnoticed.
 */
export function readVitestReport(file: string): NamedTally {
  if (!existsSync(file)) return { passed: 0, failed: 1, skipped: 0, failedNames: [`${file}: no report written`] };
  try {
    const r = JSON.parse(readFileSync(file, "utf8")) as VitestJson;
    const suiteFailures = r.numFailedTests === 0 && (r.numFailedTestSuites ?? 0) > 0 ? (r.numFailedTestSuites ?? 0) : 0;
    return {
      passed: r.numPassedTests,
      failed: r.numFailedTests + suiteFailures,
      skipped: r.numPendingTests + r.numTodoTests,
      failedNames: failedNamesOf(r),
    };
  } catch {
    // A truncated report means the run died mid-write: count it as a failure rather than guessing.
    return { passed: 0, failed: 1, skipped: 0, failedNames: [`${file}: unreadable report`] };
  }
}

function failedNamesOf(r: VitestJson): string[] {
  const names: string[] = [];
  for (const suite of r.testResults ?? []) {
    const failed = (suite.assertionResults ?? []).filter((a) => a.status === "failed");
    const file = suite.name ?? "?";
    for (const a of failed) names.push(`${file}: ${a.fullName ?? "?"}${why(a.failureMessages)}`);
    if (failed.length === 0 && suite.message) names.push(`${file}: ${suite.message.split("\n")[0]}`);
  }
  return names;
}

/** The first line of a test's first failure message (CI shows only the end of the output), at most 300 chars. */
function why(messages: readonly string[] | undefined): string {
  const first = messages?.[0]?.split("\n")[0]?.trim();
  return first ? `\n      ${first.slice(0, 300)}` : "";
}

/**
 * The tally the nested lane wrote (`npm run test:nested -- --report FILE`: passed, failed, skipped, with the
 * failures and skips named). A missing or unreadable report (the lane crashed) counts as one failure.
 */
export function readLaneReport(file: string): NamedTally {
  try {
    const r = JSON.parse(readFileSync(file, "utf8")) as Partial<Tally> & { failedNames?: unknown };
    if (typeof r.passed !== "number" || typeof r.failed !== "number" || typeof r.skipped !== "number")
      return { passed: 0, failed: 1, skipped: 0, failedNames: ["nested lane: malformed report"] };
    const names = Array.isArray(r.failedNames) ? r.failedNames.map((n) => `nested lane: ${String(n)}`) : [];
    return { passed: r.passed, failed: r.failed, skipped: r.skipped, failedNames: names };
  } catch {
    return { passed: 0, failed: 1, skipped: 0, failedNames: ["nested lane: no report (the lane crashed)"] };
  }
}
