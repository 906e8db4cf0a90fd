/**
 * The vitest settings every project shares (each project's vitest.config.ts is `projectConfig({...})`), and the
 * reporter that names what vitest's JSON report leaves unnamed: a failed beforeAll/afterAll hook and an error thrown
 * outside any test. The JSON report counts such a failure (a failed suite, no failed test) but carries no message,
 * so `npm test` could say "2 failed" and name nothing; vitest-reports.ts reads this reporter's file beside it.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { defineConfig, type ViteUserConfig } from "vitest/config";
import type { Reporter, TestModule } from "vitest/node";

type TestOptions = NonNullable<ViteUserConfig["test"]>;

/** The errors no test owns, by file: `{ "<file>": ["<suite>: <first line>"], "(unhandled)": [...] }`. */
export type OutsideErrors = Record<string, string[]>;

/** The JSON report's path for this lane (Node or Deno, and e2e's kube lane), relative to the project. */
export function reportPath(suffix = ""): string {
  return `.reports/vitest${"Deno" in globalThis ? "-deno" : ""}${suffix}.json`;
}

/** The file the outside-errors reporter writes beside a JSON report. */
export function outsideErrorsPath(report: string): string {
  return report.replace(/\.json$/, ".outside-errors.json");
}

/**
 * A project's vitest config: the shared defaults (30 s per test, 60 s per hook: the 2-core CI machine runs several
 * suites at once, and vitest's 10 s hook default failed cleanups there), the JSON report and the outside-errors
 * file; `test` adds or overrides.
 */
export function projectConfig(test: TestOptions = {}, reportSuffix = ""): ViteUserConfig {
  const report = reportPath(reportSuffix);
  return defineConfig({
    test: {
      passWithNoTests: true,
      testTimeout: 30_000,
      hookTimeout: 60_000,
      include: ["src/**/*.test.ts"],
      reporters: ["default", ["json", { outputFile: report }], new OutsideErrorsReporter(outsideErrorsPath(report))],
      ...test,
    },
  });
}

/** Writes every error that is not a test's own (hooks, collection, unhandled) to `file`, `{}` when there is none. */
export class OutsideErrorsReporter implements Reporter {
  readonly #file: string;
  constructor(file: string) {
    this.#file = resolve(file);
  }

  onTestRunEnd(modules: ReadonlyArray<TestModule>, unhandled: ReadonlyArray<{ message?: string; name?: string }>) {
    const out: OutsideErrors = {};
    for (const m of modules) {
      const lines = m.errors().map((e) => firstLine(e.message));
      for (const s of m.children.allSuites())
        lines.push(...s.errors().map((e) => `${s.fullName}: ${firstLine(e.message)}`));
      if (lines.length > 0) out[m.moduleId] = lines;
    }
    if (unhandled.length > 0)
      out["(unhandled)"] = unhandled.map((e) => `${e.name ?? "Error"}: ${firstLine(e.message)}`);
    mkdirSync(dirname(this.#file), { recursive: true });
    writeFileSync(this.#file, `${JSON.stringify(out, null, 1)}\n`);
  }
}

/** A message's first line, trimmed, at most 300 characters (CI shows only the end of the output). */
export function firstLine(message: string | undefined): string {
  return (message ?? "").split("\n")[0]?.trim().slice(0, 300) ?? "";
}
