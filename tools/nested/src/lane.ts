/**
 * Where our VMM's real-KVM checks run, and running them there. `npm test` and `npm run test:nested` both come here.
 *
 *   this host's KVM runs Linux (hardware VT-x/SVM)?
 *     yes --> "host":   guest-checks.ts `host` on this machine (boots, live migrations, vm-cirros through
 *                       virt-launcher); the real-KVM test files already ran in the host's own `npm test` projects
 *     no  --> "nested": L1 (QEMU TCG, nested SVM KVM; l1-run.ts) runs guest-checks.ts: the same checks plus those
 *                       test files (guest-suite.ts L1_SUITES)
 *
 * Before either, everything the job needs is built here (the addon and the test guest by native's Makefile, the demo
 * image): L1 sees the project read-only and cannot build. A job that does not print its end line, or prints no
 * check, is a failure with the reason, never an empty success.
 */
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { buildDebianCloud, buildDemoLinux } from "@kvt/images";
import { kvmRunsLinux } from "@kvt/vmm";
import { CHECK_START, GROUP_START } from "./check-runner.ts";
import { buildL1Image, type L1Image, projectRoot } from "./l1-image.ts";
import { type L1Result, runInL1 } from "./l1-run.ts";
import {
  jobFinished,
  type LaneTally,
  laneTally,
  lastNamed,
  linesBefore,
  type NestedCheck,
  parseChecks,
} from "./results.ts";

/** Where the checks ran. */
export type LaneKind = "host" | "nested";

/** What to run. */
export interface LaneOptions {
  /** `auto` (default): host when this host's KVM runs Linux, else nested. */
  readonly lane?: "auto" | LaneKind;
  /** The job's arguments (guest-checks.ts): e.g. ["migration", "2"], ["vm-cirros"], ["suite"]. */
  readonly only?: readonly string[];
  /** Progress lines. */
  readonly log: (line: string) => void;
  /** Every console line of the job, not only the results. */
  readonly verbose?: boolean;
  /** Stop the job after this long (default {@link DEFAULT_LANE_TIMEOUT_MS}). */
  readonly timeoutMs?: number;
}

/** How the lane went. */
export interface LaneRun {
  readonly lane: LaneKind;
  readonly checks: readonly NestedCheck[];
  readonly tally: LaneTally;
  /** Wall time of the job (L1 boot included in the nested lane). */
  readonly wallMs: number;
}

const JOB = "tools/nested/src/guest-checks.ts";

/** The lane `requested` resolves to on this host. */
export function pickLane(requested: "auto" | LaneKind = "auto"): LaneKind {
  if (requested !== "auto") return requested;
  return kvmRunsLinux() ? "host" : "nested";
}

function runCommand(cmd: string, args: readonly string[], log: (line: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: projectRoot, stdio: ["ignore", "pipe", "pipe"] });
    const tail: string[] = [];
    for (const s of [child.stdout, child.stderr])
      createInterface({ input: s }).on("line", (l) => {
        tail.push(l);
        if (tail.length > 30) tail.shift();
      });
    child.on("error", (err) => reject(new Error(`cannot run ${cmd}: ${err.message}`)));
    child.on("exit", (code) => {
      if (code === 0) resolve();
      else {
        log(tail.join("\n"));
        reject(new Error(`${cmd} ${args.join(" ")} failed with exit code ${code} (its last lines are above)`));
      }
    });
  });
}

/**
 * Builds what the job needs: the addon and the test guest, and the C++ unit tests unless `addonOnly` (benches); a
 * no-op when they are current.
 */
export async function prepareLane(log: (line: string) => void, addonOnly = false): Promise<void> {
  const targets = addonOnly ? ["all"] : ["all", "build/test/unit_tests"];
  log(
    `nested: building the native addon and the test guest${addonOnly ? "" : " and the C++ unit tests"} (make -C native)`,
  );
  await runCommand("make", ["-s", "-j2", "-C", "native", ...targets], log);
}

/**
 * The lane's budget: 30 minutes. L1 usually runs 10-17 minutes; in CI the kube lane runs beside it on the other
 * core, and one such run passed 20 minutes while its last suites were still passing (CI 2026-11-27).
 */
export const DEFAULT_LANE_TIMEOUT_MS = 30 * 60_000;

function runOnHost(args: readonly string[], options: LaneOptions): Promise<{ lines: string[]; wallMs: number }> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [JOB, ...args], { cwd: projectRoot, stdio: ["ignore", "pipe", "inherit"] });
    const lines: string[] = [];
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? DEFAULT_LANE_TIMEOUT_MS);
    createInterface({ input: child.stdout }).on("line", (line) => {
      lines.push(line);
      if (options.verbose || /^KVT_/.test(line))
        options.log(`[host +${((Date.now() - started) / 1000).toFixed(1)}s] ${line}`);
    });
    child.on("error", reject);
    child.on("exit", () => {
      clearTimeout(timer);
      resolve({ lines, wallMs: Date.now() - started });
    });
  });
}

/** Runs the checks in the lane that applies; never throws for a failed check (the tally says it). */
export async function runLane(options: LaneOptions): Promise<LaneRun> {
  const lane = pickLane(options.lane);
  const log = options.log;
  await prepareLane(log);
  // The debian group boots local/debian-cloud: built here (minutes when cold, cached after), as L1 cannot build.
  if (options.only?.[0] === "debian") await buildDebianCloud({ log: (line) => log(`nested: ${line}`) });
  if (lane === "host") {
    log("nested: this host's KVM runs Linux guests: the checks run here (the lane's L1 is not needed)");
    await buildDemoLinux({ log }); // the checks boot the demo image (L1's build does this on the nested path)
    const r = await runOnHost(options.only?.length ? options.only : ["host"], options);
    const checks = parseChecks(r.lines);
    const unfinished = jobFinished(r.lines) ? undefined : "the job on the host did not finish (crashed or timed out)";
    return { lane, checks, tally: laneTally(checks, unfinished), wallMs: r.wallMs };
  }
  const t0 = Date.now();
  const image = await buildL1Image(log);
  log(`nested: L1 kernel ${image.kernelVersion}, initramfs ${image.initrdPath} (ready in ${Date.now() - t0} ms)`);
  const budget = options.timeoutMs ?? DEFAULT_LANE_TIMEOUT_MS;
  let result = await runJob(image, options.only ?? [], budget, options);
  let lines = result.lines;
  let wallMs = result.wallMs;
  let stall: string | undefined;
  const group = lastNamed(lines, GROUP_START);
  if (result.stopped && group) {
    // Stuck, not failing: every check bounds its own waits, so a job that prints nothing for STALL_MS is wedged
    // (the lane once lost 20 minutes to one). The lines say where; the groups from there run again in a fresh L1.
    stall = `L1 stalled in ${lastNamed(lines, CHECK_START) ?? group} (no output for ${STALL_MS / 1000} s)`;
    log(`nested: ${stall}; L1's last lines:\n${lines.slice(-60).join("\n")}`);
    log(`nested: running the checks from group ${group} on again in a fresh L1`);
    const again = await runJob(image, ["resume", group], Math.max(budget - wallMs, 8 * 60_000), options);
    lines = [...linesBefore(lines, `${GROUP_START}${group}`), ...again.lines];
    wallMs += again.wallMs;
    result = again;
  }
  const checks = parseChecks(lines);
  let unfinished: string | undefined;
  if (result.timedOut || result.stopped) {
    const how = result.timedOut ? "(timeout)" : `(no output for ${STALL_MS / 1000} s)`;
    const last = lastNamed(result.lines, CHECK_START);
    unfinished = `L1 was stopped after ${Math.round(result.wallMs / 1000)} s ${how}${last ? ` in ${last}` : ""}`;
    log(`nested: last L1 lines:\n${result.lines.slice(-60).join("\n")}`);
  } else if (!jobFinished(result.lines)) {
    const why = result.lines.filter((l) => /KVT_L1_FAIL|KVT_L1_JOB_EXIT|Error|error:/.test(l)).slice(-5);
    unfinished = `the job in L1 did not finish${why.length ? `: ${why.join(" | ")}` : ""}`;
    log(`nested: last L1 lines:\n${result.lines.slice(-30).join("\n")}`);
  }
  let tally = laneTally(checks, unfinished);
  if (stall && !unfinished) {
    // Shown in the summary's skipped list, so a stall that a second L1 got past is never silent.
    const skippedNames = [...tally.skippedNames, `lane: ${stall}; the checks from there ran again in a fresh L1`];
    tally = { ...tally, skipped: skippedNames.length, skippedNames };
  }
  return { lane, checks, tally, wallMs };
}

/**
 * No line from the job for this long (the L1 monitor's lines aside) means it is stuck: longer than any wait of a
 * check (boots 240 s) or any test file of the suites.
 */
const STALL_MS = 6 * 60_000;

/** Runs the job in L1 with `args`, stopping it after `timeoutMs` or when it stalls (STALL_MS without output). */
async function runJob(
  image: L1Image,
  args: readonly string[],
  timeoutMs: number,
  options: LaneOptions,
): Promise<L1Result> {
  const stalled = new AbortController();
  let lastOutput = Date.now();
  const watch = setInterval(() => {
    if (Date.now() - lastOutput > STALL_MS) stalled.abort();
  }, 5_000);
  try {
    return await runInL1(image, {
      job: JOB,
      ...(args.length ? { args } : {}),
      timeoutMs,
      signal: stalled.signal,
      onLine: (line, atMs) => {
        if (!line.startsWith("l1-monitor:")) lastOutput = Date.now();
        if (options.verbose || /^KVT_/.test(line)) options.log(`[L1 +${(atMs / 1000).toFixed(1)}s] ${line}`);
      },
    });
  } finally {
    clearInterval(watch);
  }
}
