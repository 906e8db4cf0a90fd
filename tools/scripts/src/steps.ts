/**
 * Runs a child command for the orchestration scripts, streaming its output, and records a pass/fail.
 */
import { spawn } from "node:child_process";

/** Outcome counts of one step or of a whole run. */
export interface Tally {
  passed: number;
  failed: number;
  skipped: number;
}

/** Runs `cmd args` in `cwd` with inherited stdio; resolves to the exit code (signals count as failure). */
export function run(
  cmd: string,
  args: readonly string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: "inherit", cwd: options.cwd, env: { ...process.env, ...options.env } });
    child.on("error", (err) => {
      process.stderr.write(`cannot run ${cmd}: ${err.message}\n`);
      resolve(127);
    });
    child.on("exit", (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  });
}

/** Adds `b` into `a`. */
export function addTally(a: Tally, b: Tally): void {
  a.passed += b.passed;
  a.failed += b.failed;
  a.skipped += b.skipped;
}

/** The closing line CI reads: `N passed, N failed, N skipped`. */
export function formatTally(t: Tally): string {
  return `${t.passed} passed, ${t.failed} failed, ${t.skipped} skipped`;
}
