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

/**
 * Runs `cmd args` in `cwd`; resolves to the exit code (signals count as failure). Its output goes to this
 * process's stdio, or, with `output`, into that array (stdout and stderr interleaved as they came), for a step that
 * runs beside another and prints its output in one piece when it ends.
 */
export function run(
  cmd: string,
  args: readonly string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; output?: Buffer[] } = {},
): Promise<number> {
  return new Promise((resolve) => {
    const { output } = options;
    const child = spawn(cmd, args, {
      stdio: output ? ["ignore", "pipe", "pipe"] : "inherit",
      cwd: options.cwd,
      env: { ...process.env, ...options.env },
    });
    if (output) for (const s of [child.stdout, child.stderr]) s?.on("data", (chunk: Buffer) => output.push(chunk));
    child.on("error", (err) => {
      const line = `cannot run ${cmd}: ${err.message}\n`;
      if (output) output.push(Buffer.from(line));
      else process.stderr.write(line);
      resolve(127);
    });
    // "close", not "exit": the piped output is complete only once both streams have ended.
    child.on("close", (code, signal) => resolve(code ?? (signal ? 128 : 1)));
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
