/**
 * How the nested jobs report and pace their checks: each check prints one line `KVT_NESTED_CHECK {"name","ok",
 * "ms","detail"}` that the lane collects (results.ts); console conversations retry until the answer shows up.
 */
import type { GuestConsole } from "./guest-console.ts";

/** Tests counted one by one, failures and skips named: a test file run as one check, or the lane's whole tally. */
export interface SuiteTests {
  readonly passed: number;
  readonly failed: number;
  readonly skipped: number;
  readonly failedNames: readonly string[];
  readonly skippedNames: readonly string[];
}

/** One check's outcome, as printed. */
export interface CheckResult {
  readonly name: string;
  readonly ok: boolean;
  readonly ms: number;
  readonly detail?: string;
  /** For a test file run as one check: its tests, counted one by one in the lane's tally. */
  readonly tests?: SuiteTests;
}

/** The line a full run prints before each group of checks (guest-checks.ts), followed by the group's name. */
export const GROUP_START = "group-start ";
/** The line check() prints before a check runs, followed by its name. */
export const CHECK_START = "check-start ";

/** Prints a check's result line. */
export function report(r: CheckResult): void {
  process.stdout.write(`KVT_NESTED_CHECK ${JSON.stringify(r)}\n`);
}

/** Runs `fn` as the check `name` (its string result is the detail, a throw fails it); true when it passed. */
export async function check(name: string, fn: () => Promise<string | undefined>): Promise<boolean> {
  const t0 = performance.now();
  // Not a result line: when the lane is stopped, the last lines it prints say which check never ended.
  process.stdout.write(`${CHECK_START}${name}\n`);
  try {
    const detail = await fn();
    report({ name, ok: true, ms: Math.round(performance.now() - t0), ...(detail ? { detail } : {}) });
    return true;
  } catch (err) {
    report({ name, ok: false, ms: Math.round(performance.now() - t0), detail: (err as Error).message });
    return false;
  }
}

/** `p`, or a rejection naming `what` after `ms`. */
export function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<T>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** A guest console the checks can type into: a local Vm's or the migration target's. */
export interface ConsolePeer {
  readonly console: GuestConsole;
  writeSerial(text: string): void;
}

/** Longest console input line: the UART's receive FIFO holds 64 bytes (newline included); more is dropped. */
export const MAX_CONSOLE_LINE = 63;

/** Types one line (and its newline) on the console; RangeError when it would not fit the UART's FIFO. */
export function typeLine(peer: ConsolePeer, line: string): void {
  if (Buffer.byteLength(line) > MAX_CONSOLE_LINE) {
    throw new RangeError(`console line longer than ${MAX_CONSOLE_LINE} bytes: ${line}`);
  }
  peer.writeSerial(`${line}\n`);
}

/**
 * Sends `line` every 2 s until `re` shows up after it (input sent before the shell reads it is not lost, but a
 * shell that is not up yet may not echo it). Resolves with the matching line and the host time it arrived.
 */
export async function converse(
  peer: ConsolePeer,
  line: string,
  re: RegExp,
  timeoutMs: number,
): Promise<{ line: string; hostMs: number }> {
  const from = peer.console.mark();
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    typeLine(peer, line);
    try {
      const m = await peer.console.waitFor(re, 2000, from);
      return { line: m.line, hostMs: Date.now() };
    } catch (err) {
      if (Date.now() > deadline) throw err;
    }
  }
}
