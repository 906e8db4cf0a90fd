import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readLaneReport, readVitestReport } from "./vitest-reports.ts";

function write(content: string): string {
  const file = join(mkdtempSync(join(tmpdir(), "kvt-report-")), "r.json");
  writeFileSync(file, content);
  return file;
}

describe("readVitestReport", () => {
  it("names each failed test by file and full name, and a file that failed to load by its message", () => {
    const file = write(
      JSON.stringify({
        numPassedTests: 3,
        numFailedTests: 2,
        numPendingTests: 1,
        numTodoTests: 0,
        numFailedTestSuites: 2,
        testResults: [
          { name: "/p/a.test.ts", assertionResults: [{ fullName: "a works", status: "passed" }] },
          { name: "/p/b.test.ts", assertionResults: [{ fullName: "b breaks", status: "failed" }] },
          {
            name: "/p/d.test.ts",
            assertionResults: [
              { fullName: "d times out", status: "failed", failureMessages: ["Error: no boot\n at x"] },
            ],
          },
          { name: "/p/c.test.ts", message: "Failed to load\nstack", assertionResults: [] },
        ],
      }),
    );
    const t = readVitestReport(file);
    expect(t).toMatchObject({ passed: 3, failed: 3, skipped: 1 });
    expect(t.failedNames).toEqual([
      "/p/b.test.ts: b breaks",
      "/p/d.test.ts: d times out\n      Error: no boot",
      "/p/c.test.ts: Failed to load",
    ]);
  });

  it("names a failed hook and an unhandled error from the outside-errors file, one failure each", () => {
    const file = write(
      JSON.stringify({
        numPassedTests: 2,
        numFailedTests: 0,
        numPendingTests: 0,
        numTodoTests: 0,
        numFailedTestSuites: 2,
        success: false,
        testResults: [{ name: "/p/a.test.ts", status: "failed", message: "", assertionResults: [] }],
      }),
    );
    writeFileSync(
      file.replace(/\.json$/, ".outside-errors.json"),
      JSON.stringify({ "/p/a.test.ts": ["d: Hook timed out in 10000ms."], "(unhandled)": ["Error: late"] }),
    );
    expect(readVitestReport(file)).toEqual({
      passed: 2,
      failed: 2,
      skipped: 0,
      failedNames: [
        "/p/a.test.ts: outside any test: d: Hook timed out in 10000ms.",
        "(unhandled): outside any test: Error: late",
      ],
    });
  });

  it("without that file, names a suite that failed with no failed test, and never lets a failed run pass", () => {
    const report = (testResults: object[], success: boolean) =>
      write(
        JSON.stringify({
          numPassedTests: 1,
          numFailedTests: 0,
          numPendingTests: 0,
          numTodoTests: 0,
          success,
          testResults,
        }),
      );
    expect(readVitestReport(report([{ name: "/p/a.test.ts", status: "failed", message: "" }], false))).toMatchObject({
      failed: 1,
      failedNames: ["/p/a.test.ts: failed outside its tests (a hook?): its output is above"],
    });
    expect(readVitestReport(report([{ name: "/p/a.test.ts", status: "passed" }], false))).toMatchObject({ failed: 1 });
    expect(readVitestReport(report([{ name: "/p/a.test.ts", status: "passed" }], true))).toMatchObject({ failed: 0 });
  });

  it("counts a missing or truncated report as one named failure", () => {
    expect(readVitestReport("/nonexistent/r.json")).toMatchObject({ failed: 1, failedNames: [expect.any(String)] });
    expect(readVitestReport(write('{"numPassedTests": 1'))).toMatchObject({ failed: 1 });
  });
});

describe("readLaneReport", () => {
  it("carries the lane's failure names", () => {
    const t = readLaneReport(write(JSON.stringify({ passed: 5, failed: 1, skipped: 0, failedNames: ["disk: boot"] })));
    expect(t).toEqual({ passed: 5, failed: 1, skipped: 0, failedNames: ["nested lane: disk: boot"] });
  });

  it("counts a malformed report as a failure", () => {
    expect(readLaneReport(write("{}"))).toMatchObject({ failed: 1 });
  });
});
