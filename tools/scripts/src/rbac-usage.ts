/**
 * `node tools/scripts/src/rbac-usage.ts [--audit FILE] [--report FILE] [--problems FILE]`: after a whole e2e run, proves that every
 * rule of each KubeVirt component's roles in deploy/ was needed by a flow of the run, and that no component read a
 * Secret it does not own (tools/local-cluster's cluster/rbac-usage.ts over the API server's authorization audit,
 * which the e2e cluster records to e2e/.reports/authz-audit.jsonl). `npm test` runs it after the e2e suite.
 *
 * Prints each rule with the request that only it allowed and the e2e file that made it; an UNUSED rule with what
 * to do; an exempt one (a path only a real cluster takes) with why. Exit 0: every rule needed and no foreign Secret read; 1: not so, or the run left no audit or report.
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import {
  componentAccounts,
  type Flow,
  formatRbacUsage,
  KUBEVIRT_OWN_SECRETS,
  LOCAL_CLUSTER_EXEMPTIONS,
  rbacUsage,
  readAuthorizationAudit,
  releaseRbacObjects,
} from "@kvt/local-cluster";
import { parseScriptArgs } from "./script-args.ts";

const root = new URL("../../../", import.meta.url).pathname;
const { values } = parseScriptArgs(
  "usage: node tools/scripts/src/rbac-usage.ts [--audit FILE] [--report FILE] [--problems FILE]\n\n" +
    "Checks a whole e2e run's authorization audit: every rule of the KubeVirt components' roles (deploy/) needed\n" +
    "by a flow, no Secret read outside a component's own.\n" +
    "  --audit FILE   the API server's authorization audit (default e2e/.reports/authz-audit.jsonl)\n" +
    "  --report FILE  the e2e run's vitest JSON report, for the files' times (default e2e/.reports/vitest.json)\n" +
    "  --problems FILE  also write each problem (an unused rule, a foreign Secret read) there, one per line",
  { options: { audit: { type: "string" }, report: { type: "string" }, problems: { type: "string" } } },
);
const auditFile = values.audit ?? join(root, "e2e/.reports/authz-audit.jsonl");
const reportFile = values.report ?? join(root, "e2e/.reports/vitest.json");

/** The e2e files of a vitest JSON report and when each ran. */
function flowsOf(file: string): { flows: Flow[]; failedFiles: number } {
  const r = JSON.parse(readFileSync(file, "utf8")) as {
    testResults?: { name?: string; startTime?: number; endTime?: number; status?: string }[];
  };
  const results = r.testResults ?? [];
  return {
    flows: results.map((t) => ({
      name: relative(root, t.name ?? "?"),
      start: t.startTime ?? 0,
      end: t.endTime ?? 0,
    })),
    failedFiles: results.filter((t) => t.status === "failed").length,
  };
}

/** Says `problems` (unless printed already) and writes them to --problems, then exits 1. */
function fail(problems: readonly string[], printed = false): never {
  if (!printed) for (const p of problems) process.stderr.write(`rbac-usage: ${p}\n`);
  if (values.problems) writeFileSync(values.problems, `${problems.join("\n")}\n`);
  process.exit(1);
}

if (values.problems) rmSync(values.problems, { force: true });
for (const f of [auditFile, reportFile])
  if (!existsSync(f)) fail([`${f} is missing: run the whole e2e suite first (cd e2e && npx vitest run)`]);
try {
  const objects = releaseRbacObjects(root);
  const { flows, failedFiles } = flowsOf(reportFile);
  const entries = readAuthorizationAudit(auditFile);
  const accounts = componentAccounts(objects);
  const report = rbacUsage(objects, accounts, entries, flows, KUBEVIRT_OWN_SECRETS, LOCAL_CLUSTER_EXEMPTIONS);
  const { ok, text } = formatRbacUsage(report, (r) => `deploy/${r.component}/rbac.yaml`);
  process.stdout.write(text);
  if (failedFiles > 0)
    process.stdout.write(`note: ${failedFiles} e2e files failed; a rule only their flows need shows as unused\n`);
  if (!ok)
    fail(
      text.split("\n").filter((l) => /^(UNUSED|SECRET|STALE) /.test(l)),
      true,
    );
} catch (error) {
  fail([(error as Error).message]);
}
