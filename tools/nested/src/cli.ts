/**
 * `npm run test:nested`: runs our VMM's real-KVM checks in the lane that applies (lane.ts): inside the nested lane's
 * L1 (QEMU TCG with nested SVM KVM, built from Debian packages) when this host's KVM cannot run Linux, else on this
 * host. Prints each result and its timing, then `N passed, N failed, N skipped`; exit 1 on any failure.
 *
 * Flags: --only migration|vm-cirros|disk|block|net|debian|suite|host  [--vcpus N]  [--file SUITE]... (with --only suite: those files of
 * guest-suite.ts L1_SUITES)  --lane auto|nested|host  --report FILE (the tally as
 * JSON, read by `npm test`)  --verbose (every console line).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { parseArgs } from "node:util";
import { runLane } from "./lane.ts";

const USAGE = `usage: npm run test:nested -- [--only migration|vm-cirros|disk|block|net|debian|suite|host] [--vcpus N] [--file SUITE]...
                            [--lane auto|nested|host] [--report FILE] [--verbose]`;

let values: {
  only?: string;
  vcpus?: string;
  lane?: string;
  report?: string;
  verbose?: boolean;
  help?: boolean;
  file?: string[];
};
try {
  ({ values } = parseArgs({
    options: {
      only: { type: "string" },
      vcpus: { type: "string" },
      lane: { type: "string" },
      report: { type: "string" },
      verbose: { type: "boolean" },
      file: { type: "string", multiple: true },
      help: { type: "boolean", short: "h" },
    },
  }));
} catch (err) {
  process.stderr.write(`${(err as Error).message}\n${USAGE}\n`);
  process.exit(2);
}
if (values.help) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}
const lane = values.lane ?? "auto";
if (lane !== "auto" && lane !== "nested" && lane !== "host") {
  process.stderr.write(`--lane ${lane}: expected auto, nested or host\n${USAGE}\n`);
  process.exit(2);
}

const log = (line: string): void => void process.stdout.write(`${line}\n`);
const only = values.only ? [values.only, ...(values.vcpus ? [values.vcpus] : []), ...(values.file ?? [])] : [];
const run = await runLane({ lane: lane, only, log, verbose: values.verbose });
log("");
log(`${"check".padEnd(40)} result  time`);
for (const c of run.checks)
  log(
    `${c.name.padEnd(40)} ${c.ok ? "ok    " : "FAILED"}  ${(c.ms / 1000).toFixed(1)} s${c.detail ? `  ${c.detail}` : ""}`,
  );
const t = run.tally;
for (const f of t.failedNames) log(`FAILED  ${f}`);
for (const s of t.skippedNames) log(`skipped ${s}`);
log(`${run.lane} lane: ${(run.wallMs / 1000).toFixed(1)} s`);
log(`${t.passed} passed, ${t.failed} failed, ${t.skipped} skipped`);
if (values.report) {
  mkdirSync(dirname(values.report), { recursive: true });
  writeFileSync(values.report, `${JSON.stringify({ lane: run.lane, wallMs: run.wallMs, ...t })}\n`);
}
process.exit(t.failed > 0 ? 1 : 0);
