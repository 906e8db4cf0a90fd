/**
 * `npm run test:nested` (in tools/nested; the root script is `npm run test:nested -w @kvt/nested`): builds the L1
 * host from Debian packages, boots it under QEMU TCG with nested SVM KVM, runs the Linux-guest checks of our VMM
 * there (guest-checks.ts) and reports each result and its timing. Exit code 1 when any check failed.
 */
import { buildL1Image } from "./l1-image.ts";
import { runInL1 } from "./l1-run.ts";
import { parseChecks } from "./results.ts";

const verbose = process.argv.includes("--verbose");
// `--only migration [--vcpus N]`: just the live-migration checks (one boot instead of four), with N vCPUs.
const argAfter = (flag: string): string | undefined => {
  const at = process.argv.indexOf(flag);
  return at > 0 ? process.argv[at + 1] : undefined;
};
const only = argAfter("--only");
const vcpus = argAfter("--vcpus");
const log = (line: string): void => void process.stdout.write(`${line}\n`);
const t0 = Date.now();
const image = await buildL1Image(log);
log(`nested: L1 kernel ${image.kernelVersion}, initramfs ${image.initrdPath} (ready in ${Date.now() - t0} ms)`);
const result = await runInL1(image, {
  job: "tools/nested/src/guest-checks.ts",
  ...(only ? { args: [only, ...(vcpus ? [vcpus] : [])] } : {}),
  // Boots, the migration group and the suites take about 10 minutes here; the issue's CI budget is 20.
  timeoutMs: 20 * 60_000,
  onLine: (line, atMs) => {
    if (verbose || /^KVT_/.test(line)) log(`[L1 +${(atMs / 1000).toFixed(1)}s] ${line}`);
  },
});
const checks = parseChecks(result.lines);
log("");
log(`${"check".padEnd(31)} result  time`);
for (const c of checks)
  log(
    `${c.name.padEnd(31)} ${c.ok ? "ok    " : "FAILED"}  ${(c.ms / 1000).toFixed(1)} s${c.detail ? `  ${c.detail}` : ""}`,
  );
log(`L1 run: ${(result.wallMs / 1000).toFixed(1)} s${result.timedOut ? " (timed out)" : ""}`);
const failed = checks.filter((c) => !c.ok).length;
if (checks.length === 0) log(`no check ran; last L1 lines:\n${result.lines.slice(-30).join("\n")}`);
log(`${checks.length - failed} passed, ${failed} failed`);
process.exit(failed || checks.length === 0 ? 1 : 0);
