/** Reads vitest JSON reports (`<project>/.reports/*.json`) into tallies. */
import { existsSync, readFileSync } from "node:fs";
import type { Tally } from "./steps.ts";

interface VitestJson {
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  numTodoTests: number;
  numFailedTestSuites?: number;
  success?: boolean;
}

/**
 * The tally of one vitest JSON report; a missing or unreadable report (the run crashed before writing it) counts
 * as one failure so it can never pass unnoticed.
 */
export function readVitestReport(file: string): Tally {
  if (!existsSync(file)) return { passed: 0, failed: 1, skipped: 0 };
  try {
    const r = JSON.parse(readFileSync(file, "utf8")) as VitestJson;
    const suiteFailures = r.numFailedTests === 0 && (r.numFailedTestSuites ?? 0) > 0 ? (r.numFailedTestSuites ?? 0) : 0;
    return {
      passed: r.numPassedTests,
      failed: r.numFailedTests + suiteFailures,
      skipped: r.numPendingTests + r.numTodoTests,
    };
  } catch {
    // A truncated report means the run died mid-write: count it as a failure rather than guessing.
    return { passed: 0, failed: 1, skipped: 0 };
  }
}

/**
 * The tally the nested lane wrote (`npm run test:nested -- --report FILE`: passed, failed, skipped, with the
 * failures and skips named). A missing or unreadable report (the lane crashed) counts as one failure.
 */
export function readLaneReport(file: string): Tally {
  try {
    const r = JSON.parse(readFileSync(file, "utf8")) as Partial<Tally>;
    if (typeof r.passed !== "number" || typeof r.failed !== "number" || typeof r.skipped !== "number")
      return { passed: 0, failed: 1, skipped: 0 };
    return { passed: r.passed, failed: r.failed, skipped: r.skipped };
  } catch {
    return { passed: 0, failed: 1, skipped: 0 };
  }
}
