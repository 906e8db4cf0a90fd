/** Reads vitest JSON reports (`<project>/.reports/*.json`) into tallies. */
import { existsSync, readFileSync } from "node:fs";
import { firstLine, type OutsideErrors, outsideErrorsPath } from "@kvt/vitest-config";
import type { Tally } from "./steps.ts";

interface VitestJson {
  testResults?: {
    name?: string;
    status?: string;
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
 * The tally of one vitest JSON report, its failures named `<file>: <test>`. The errors no test owns (a failed hook, a
 * file that failed to load, an unhandled error) come from the outside-errors file beside it (@kvt/vitest-config), one
 * failure each, since the JSON report counts them as failed suites with no message. A missing or unreadable report
 * (the run crashed before writing it) counts as one failure so it can never pass unnoticed.
 */
export function readVitestReport(file: string): NamedTally {
  if (!existsSync(file)) return { passed: 0, failed: 1, skipped: 0, failedNames: [`${file}: no report written`] };
  let r: VitestJson;
  try {
    r = JSON.parse(readFileSync(file, "utf8")) as VitestJson;
  } catch {
    // A truncated report means the run died mid-write: count it as a failure rather than guessing.
    return { passed: 0, failed: 1, skipped: 0, failedNames: [`${file}: unreadable report`] };
  }
  const names = failedTestNames(r);
  const outside = readOutsideErrors(outsideErrorsPath(file));
  if (outside) {
    for (const [where, lines] of Object.entries(outside)) {
      for (const line of lines) names.push(`${where}: outside any test: ${line}`);
    }
  } else {
    // No outside-errors file: name what the JSON report itself says of a suite that failed with no failed test.
    for (const suite of r.testResults ?? []) {
      const failed = (suite.assertionResults ?? []).some((a) => a.status === "failed");
      if (failed || (suite.status !== "failed" && !suite.message)) continue;
      const why = suite.message?.split("\n")[0] || "failed outside its tests (a hook?): its output is above";
      names.push(`${suite.name ?? "?"}: ${why}`);
    }
  }
  let failed = Math.max(names.length, r.numFailedTests);
  if (failed === 0 && (r.success === false || (r.numFailedTestSuites ?? 0) > 0)) {
    names.push(`${file}: vitest reported a failure no test or suite names: its output is above`);
    failed = 1;
  }
  return { passed: r.numPassedTests, failed, skipped: r.numPendingTests + r.numTodoTests, failedNames: names };
}

function readOutsideErrors(file: string): OutsideErrors | undefined {
  try {
    return JSON.parse(readFileSync(file, "utf8")) as OutsideErrors;
  } catch {
    return undefined;
  }
}

function failedTestNames(r: VitestJson): string[] {
  const names: string[] = [];
  for (const suite of r.testResults ?? []) {
    const file = suite.name ?? "?";
    for (const a of suite.assertionResults ?? []) {
      if (a.status === "failed") names.push(`${file}: ${a.fullName ?? "?"}${why(a.failureMessages)}`);
    }
  }
  return names;
}

/** The first line of a test's first failure message (CI shows only the end of the output), at most 300 chars. */
function why(messages: readonly string[] | undefined): string {
  const first = firstLine(messages?.[0]);
  return first ? `\n      ${first}` : "";
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
