/**
 * `npm test`: builds what the tests need, then runs every project's tests (Nx), the check that every RBAC rule of
 * the KubeVirt components is needed by an e2e flow (rbac-usage.ts, over the e2e run's authorization audit), the
 * typecheck, the lint (Biome and type-aware ESLint with the module-boundary rule), and the Deno lane (libs' tests under Deno, every app's --help
 * under Deno), our VMM's real-KVM checks in the nested lane (tools/nested) when this host's KVM cannot run Linux, and
 * the kube lane: the same e2e suite on a real Kubernetes (tools/kube: kube-apiserver, etcd, real kubelets with
 * containerd) with the release installed from deploy/ (e2e/lib/kube-cluster.ts).
 * Prints `N passed, N failed, N skipped` last and writes it to .reports/test-summary.txt.
 *
 * Flags: --skip-deno, --skip-lint, --skip-nested, --skip-kube (for quick local loops; CI runs everything).
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureCompilerCache } from "./compiler-cache.ts";
import { parseScriptArgs } from "./script-args.ts";
import { addTally, formatTally, run, type Tally } from "./steps.ts";
import { type NamedTally, readLaneReport, readVitestReport } from "./vitest-reports.ts";

const root = new URL("../../../", import.meta.url).pathname;
const bin = (name: string): string => join(root, "node_modules/.bin", name);
// Usage and flag check first: --help, or an unknown flag, must not start a whole run.
parseScriptArgs(
  "usage: npm test [-- [--skip-deno] [--skip-lint] [--skip-nested] [--skip-kube]]\n\nRuns every project's tests, the nested lane, typecheck, lint, the Deno lane and the e2e suite on a real Kubernetes.",
  {
    options: {
      "skip-deno": { type: "boolean" },
      "skip-lint": { type: "boolean" },
      "skip-nested": { type: "boolean" },
      "skip-kube": { type: "boolean" },
    },
  },
);
const args = new Set(process.argv.slice(2));
const env = { NX_NO_CLOUD: "true", NX_DAEMON: "false", NX_TUI: "false" };

function projectDirs(): string[] {
  const dirs: string[] = [];
  for (const parent of ["apps", "libs", "tools"]) {
    for (const e of readdirSync(join(root, parent), { withFileTypes: true })) {
      if (e.isDirectory()) dirs.push(join(root, parent, e.name));
    }
  }
  dirs.push(join(root, "native"), join(root, "e2e"));
  return dirs.filter((d) => existsSync(join(d, "package.json")));
}

const total: Tally = { passed: 0, failed: 0, skipped: 0 };
/** Every failure by name, printed just above the summary line (CI shows only the end of the output). */
const failedNames: string[] = [];
function addNamed(t: NamedTally): void {
  addTally(total, t);
  failedNames.push(...t.failedNames);
}

/**
 * Runs a step between `=== name ===` lines and resolves to its exit code. With `beside`, it runs while the nested
 * lane prints: its output is held and printed in one piece when it ends, so the two never interleave.
 */
async function step(
  name: string,
  cmd: string,
  cmdArgs: string[],
  options: { cwd?: string; beside?: boolean; env?: NodeJS.ProcessEnv; ok?: (code: number) => string } = {},
): Promise<number> {
  const output: Buffer[] | undefined = options.beside ? [] : undefined;
  if (!output) process.stdout.write(`\n=== ${name} ===\n`);
  const t0 = Date.now();
  const code = await run(cmd, cmdArgs, { cwd: options.cwd ?? root, env: { ...env, ...options.env }, output });
  const verdict = options.ok ? options.ok(code) : code === 0 ? "ok" : `FAILED (exit ${code})`;
  const tail = `=== ${name}: ${verdict} (${seconds(t0)}) ===\n`;
  process.stdout.write(output ? `\n=== ${name} ===\n${Buffer.concat(output).toString()}${tail}` : tail);
  return code;
}

/** Runs a check; on failure the lines of `options.details` (a file the check writes) follow its name. */
async function check(
  name: string,
  cmd: string,
  cmdArgs: string[],
  options: { cwd?: string; details?: string; beside?: boolean } = {},
): Promise<void> {
  const code = await step(name, cmd, cmdArgs, options);
  const ok = code === 0;
  const details = options.details && existsSync(options.details) ? readFileSync(options.details, "utf8").trim() : "";
  const why = details ? `\n      ${details.split("\n").join("\n      ")}` : "";
  addNamed({
    passed: ok ? 1 : 0,
    failed: ok ? 0 : 1,
    skipped: 0,
    failedNames: ok ? [] : [`${name}: exit ${code}${why}`],
  });
}

/** Seconds since `t0`, for the stage lines (where CI's time goes). */
function seconds(t0: number): string {
  return `${Math.round((Date.now() - t0) / 1000)} s`;
}

const vitestProjects = projectDirs().filter((d) => existsSync(join(d, "vitest.config.ts")));
for (const dir of vitestProjects) rmSync(join(dir, ".reports"), { recursive: true, force: true });

// 0. The kube lane's binaries (kube-apiserver, kubelet, etcd, containerd, ... from the Go module proxy) build from the
// start, beside everything else: every go command runs under `nice -n 19`, so it only takes what the tests leave
// idle. With Go's module and build caches warm it is about 80 s of linking; on a fresh machine about 25 minutes of
// compiling, which this keeps off the critical path (the lane itself starts after the tests, step 5).
const kubeBuild = args.has("--skip-kube")
  ? Promise.resolve(0)
  : step(
      "kube lane: build the pinned Kubernetes, etcd and containerd (cached)",
      process.execPath,
      [join(root, "tools/kube/src/cli.ts"), "build"],
      { beside: true },
    );

// 1. Build, then the unit/integration tests of every project. The e2e suite is the longest task (about 14 of the
// stage's 19 minutes), so it starts as soon as the builds are done, beside the other projects' tests (two at a
// time), rather than waiting for a free slot in one Nx run as it used to (it started 5 minutes late).
process.stdout.write("\n=== tests (nx run-many -t test) ===\n");
const testsFrom = Date.now();
const noCcache = await ensureCompilerCache((line) => process.stdout.write(`${line}\n`));
if (noCcache) process.stdout.write(`${noCcache}\n`);
const nxRun = (nxArgs: string[]): Promise<number> =>
  run(bin("nx"), [...nxArgs, "--outputStyle=stream", "--skip-nx-cache"], { cwd: root, env });
await nxRun(["run-many", "-t", "build"]);
const otherProjects = nxRun([
  "run-many",
  "-t",
  "test",
  "--exclude",
  "e2e",
  "--parallel",
  "2",
  "--excludeTaskDependencies",
]);
// 2 starts as soon as the other projects' tests end: the e2e suite runs on for minutes after them (about 13 minutes
// against their 11 in CI), and the nested lane, CI's longest step, then ends that much sooner. The e2e suite and L1
// share the two cores as the kube lane and L1 do later.
const nested = args.has("--skip-nested") ? Promise.resolve() : otherProjects.then(() => nestedLane());
await Promise.all([nxRun(["run", "e2e:test", "--excludeTaskDependencies"]), otherProjects]);
process.stdout.write(`=== tests (nx run-many -t test): done (${seconds(testsFrom)}) ===\n`);
for (const dir of vitestProjects) addNamed(readVitestReport(join(dir, ".reports/vitest.json")));
// The e2e run's authorization audit: every rule of the KubeVirt components' roles needed by a flow, no Secret read
// outside a component's own (rbac-usage.ts names each unused rule and what to do).
const rbacProblems = join(root, "e2e/.reports/rbac-usage-problems.txt");
await check(
  "e2e: every component RBAC rule needed by a flow",
  process.execPath,
  [join(root, "tools/scripts/src/rbac-usage.ts"), "--problems", rbacProblems],
  { details: rbacProblems },
);

// 2. Our VMM on a real KVM (tools/nested lane.ts): inside the nested lane's L1 when this host's KVM cannot run Linux
// (none, or PVM), else on this host. It starts when the projects' tests other than e2e end (above): L1 is pure TCG,
// and its one vCPU keeps one core busy, beside the e2e suite, then beside the typecheck, the lint and the Deno lane
// (3 to 4 minutes of one core, their output held until each ends) and the kube lane.
async function nestedLane(): Promise<void> {
  const report = join(root, ".reports/nested.json");
  rmSync(report, { force: true });
  process.stdout.write("\n=== our VMM on real KVM (the nested lane, or this host when its KVM runs Linux) ===\n");
  const laneFrom = Date.now();
  await run(process.execPath, [join(root, "tools/nested/src/cli.ts"), "--report", report], { cwd: root, env });
  process.stdout.write(`=== the nested lane: done (${seconds(laneFrom)}) ===\n`);
  addNamed(readLaneReport(report));
}

// 3. Typecheck and lint; 4. the Deno lane: the libs' and native's tests under Deno, and every app's --help under Deno.
async function besideTheLane(): Promise<void> {
  const beside = !args.has("--skip-nested");
  // The benches' tsconfigs (no emit, so not references of the root's) are checked too: a bench that no longer
  // compiles fails here rather than when someone next runs it.
  const benches = [...projectDirs().map((d) => join(d, "bench")), join(root, "docs/decisions/benches")]
    .map((d) => join(d, "tsconfig.json"))
    .filter((f) => existsSync(f));
  await check("typecheck (tsc -b, the benches too)", bin("tsc"), ["-b", "tsconfig.json", ...benches], { beside });
  if (!args.has("--skip-lint")) {
    await check("lint: biome", bin("biome"), ["check", "."], { beside });
    await check("lint: eslint (type-aware, module boundaries)", bin("eslint"), ["."], { beside });
  }
  if (args.has("--skip-deno")) return;
  const denoProjects = vitestProjects.filter((d) => d.includes("/libs/") || d.endsWith("/native"));
  for (const dir of denoProjects) {
    const vitest = join(root, "node_modules/vitest/vitest.mjs");
    await step(`deno: tests of ${dir.slice(root.length)}`, bin("deno"), ["run", "-A", vitest, "run"], {
      cwd: dir,
      beside,
      ok: () => "done",
    });
    addNamed(prefixed("deno: ", readVitestReport(join(dir, ".reports/vitest-deno.json"))));
  }
  for (const app of readdirSync(join(root, "apps"))) {
    const main = join(root, "apps", app, "src/main.ts");
    await check(`deno: ${app} --help`, bin("deno"), ["run", "-A", main, "--help"], { beside });
  }
}

// 5. The kube lane: the e2e suite on a real Kubernetes, the release installed as a user installs it (e2e/lib/
// kube-cluster.ts: `npm run kube -- up`, the images pushed to its registry, `kubectl apply -k deploy/`, KubeVirt
// Available), the files needing the local cluster's internals left out with their reasons (e2e/lib/cluster-kind.ts).
// It runs beside the nested lane, after the typecheck, lint and Deno lane: L1 keeps one core busy, this the other.
async function kubeLane(): Promise<void> {
  if (args.has("--skip-kube")) return;
  const built = await kubeBuild;
  if (built !== 0) {
    addNamed({ passed: 0, failed: 1, skipped: 0, failedNames: ["kube lane: the build failed (its output is above)"] });
    return;
  }
  const e2e = join(root, "e2e");
  const report = join(e2e, ".reports/vitest-kube.json");
  rmSync(report, { force: true });
  await step("kube lane: the e2e suite on a real Kubernetes", bin("vitest"), ["run"], {
    cwd: e2e,
    beside: !args.has("--skip-nested"),
    env: { KVT_E2E_CLUSTER: "kube" },
    ok: () => "done",
  });
  addNamed(prefixed("kube: ", readVitestReport(report)));
}

await Promise.all([nested, besideTheLane().then(kubeLane)]);

function prefixed(prefix: string, t: NamedTally): NamedTally {
  return { ...t, failedNames: t.failedNames.map((n) => prefix + n) };
}

if (failedNames.length > 0) {
  process.stdout.write(`\nFailed (${failedNames.length}):\n${failedNames.map((n) => `  ${n}`).join("\n")}\n`);
}
const line = formatTally(total);
mkdirSync(join(root, ".reports"), { recursive: true });
writeFileSync(join(root, ".reports/test-summary.txt"), `${line}\n`);
process.stdout.write(`\n${line}\n`);
process.exit(total.failed > 0 ? 1 : 0);
