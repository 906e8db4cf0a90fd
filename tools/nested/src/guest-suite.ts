/**
 * The test-guest suites of the VMM on L1's nested SVM KVM (nothing in the VMM may depend on this host's PVM): vitest
 * runs libs/vmm's real-KVM tests (boot, pause, save/restore hops, dirty log, throttle) and libs/migration's
 * process-to-process live migrations inside L1, and each file becomes one check.
 *
 *   L1 job --> /tmp/kvt-l1-vitest.config.mjs (the project is read-only over 9p: cache and report go to /tmp)
 *          --> node vitest run --config ... --> /tmp/kvt-l1-vitest.json --> KVT_NESTED_CHECK per file
 */
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { CHECK_START, report, type SuiteTests } from "./check-runner.ts";

/**
 * The real-KVM test files run in L1, relative to the project root: the same files `npm test` runs on the host (where
 * they skip without a KVM that runs them). nested.test.ts fails when a test file that gates on KVM is missing here.
 */
export const L1_SUITES = [
  "native/test/unit.test.ts",
  "native/test/addon.test.ts",
  "libs/vmm/src/vm.test.ts",
  "libs/vmm/src/vm-lifecycle.test.ts",
  "libs/vmm/src/linux-boot.test.ts",
  "libs/vmm/src/test-guest.test.ts",
  "libs/migration/src/live-migration.test.ts",
  "apps/virt-launcher/src/machine/native/native-machine.test.ts",
  "apps/virt-launcher/src/machine/native/idle-guest.test.ts",
  "apps/virt-launcher/src/machine/native/native-migration.test.ts",
  "apps/virt-handler/src/handler-app.integration.test.ts",
  "tools/local-cluster/src/kubelet/launcher-image.test.ts",
] as const;

const REPORT = "/tmp/kvt-l1-vitest.json";
const CONFIG = "/tmp/kvt-l1-vitest.config.mjs";

interface VitestJson {
  testResults: {
    name: string;
    startTime?: number;
    endTime?: number;
    assertionResults: {
      fullName: string;
      status: string;
      duration?: number | null;
      failureMessages?: readonly string[] | null;
    }[];
  }[];
}

/** How much of a failed test's first message line a check's detail carries. */
const FAILURE_MESSAGE_CHARS = 240;

/**
 * One check per suite file from vitest's JSON report: passed when no test failed and at least one ran. Each carries
 * its per-test counts (`tests`), which the lane adds to `npm test`'s tally test by test, skips named.
 */
export function suiteChecks(
  json: VitestJson,
  root: string,
  ms: number,
): { name: string; ok: boolean; detail: string; tests: SuiteTests }[] {
  return json.testResults.map((file) => {
    const named = (...statuses: string[]): string[] =>
      file.assertionResults.filter((a) => statuses.includes(a.status)).map((a) => a.fullName);
    const failed = named("failed");
    const skipped = named("skipped", "pending", "todo");
    const passed = named("passed").length;
    // The file's own time, so the lane's log says where the suites' minutes go (the run's total follows).
    const own = file.startTime && file.endTime ? `${Math.round((file.endTime - file.startTime) / 1000)} s of ` : "";
    // Each failure with the first line of its message: L1's vitest output does not reach the lane's log.
    const why = file.assertionResults
      .filter((a) => a.status === "failed")
      .map((a) => {
        const lines = a.failureMessages?.[0]?.split("\n") ?? [];
        // The message and the test file's line it came from (the first stack frame in a .test.ts).
        const at = lines.find((l) => /\.test\.ts:\d+/.test(l))?.trim();
        const first = [lines[0], at].filter(Boolean).join(" ").slice(0, FAILURE_MESSAGE_CHARS);
        return first ? `${a.fullName} (${first})` : a.fullName;
      });
    const detail =
      `${passed} passed, ${failed.length} failed, ${skipped.length} skipped (${own}vitest ${Math.round(ms / 1000)} s)` +
      (why.length ? `: ${why.join("; ")}` : "");
    const name = `suite ${file.name.replace(`${root}/`, "")}`;
    const tests: SuiteTests = {
      passed,
      failed: failed.length,
      skipped: skipped.length,
      failedNames: failed,
      skippedNames: skipped,
    };
    return { name, ok: failed.length === 0 && passed > 0, detail, tests };
  });
}

/** Runs the suites (`files` of them when given) under vitest inside L1 and reports one check per file. */
export async function testGuestSuiteChecks(files: readonly string[] = []): Promise<void> {
  const unknown = files.filter((f) => !(L1_SUITES as readonly string[]).includes(f));
  if (unknown.length) throw new Error(`not an L1 suite: ${unknown.join(" ")} (see L1_SUITES in guest-suite.ts)`);
  const root = fileURLToPath(new URL("../../..", import.meta.url)).replace(/\/$/, "");
  writeFileSync(
    CONFIG,
    `export default ${JSON.stringify({
      cacheDir: "/tmp/kvt-l1-vite",
      test: {
        root,
        include: files.length ? [...files] : [...L1_SUITES],
        // Vitest's module cache defaults to node_modules/.vitest-cache, which L1 sees read-only.
        fsModuleCachePath: "/tmp/kvt-l1-vitest-cache",
        // Nested KVM under TCG is one to two orders of magnitude slower than this host's KVM.
        testTimeout: 600_000,
        hookTimeout: 600_000,
        fileParallelism: false,
        // One worker runs every file without a fresh module graph each: under TCG a new worker and its imports cost
        // about 12 s a file (145 s of the suite's 684 s in CI). The files share no state but the addon (loaded once
        // either way); each stops what it starts in its own hooks.
        isolate: false,
        reporters: ["default", ["json", { outputFile: REPORT }]],
      },
    })};\n`,
  );
  process.stdout.write(`${CHECK_START}suite\n`); // as check() does: the lane names it if L1 is stopped here
  const t0 = performance.now();
  const vitest = `${root}/node_modules/vitest/vitest.mjs`;
  const code = await new Promise<number | null>((resolve) => {
    // Piped, not the console itself: on a TTY vitest redraws its summary every second, and each byte through L1's
    // emulated UART costs the TCG host time; through a pipe it prints each file once.
    const child = spawn(process.execPath, [vitest, "run", "--config", CONFIG], {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
    });
    for (const s of [child.stdout, child.stderr]) s.on("data", (chunk: Buffer) => process.stdout.write(chunk));
    child.on("exit", resolve);
    child.on("error", () => resolve(null));
  });
  const ms = performance.now() - t0;
  let json: VitestJson;
  try {
    json = JSON.parse(readFileSync(REPORT, "utf8")) as VitestJson;
  } catch (err) {
    report({
      name: "suite",
      ok: false,
      ms: Math.round(ms),
      detail: `vitest exited ${code}: ${(err as Error).message}`,
    });
    return;
  }
  for (const c of suiteChecks(json, root, ms)) report({ ...c, ms: Math.round(ms) });
}
