/**
 * `npm run kube -- build`: compiles the pinned Kubernetes, etcd, containerd, kwok and local-path-provisioner
 * binaries from the Go module
 * proxy into `<data-dir>/bin/<kubernetes-version>/`, each step skipped when the stamp says its binaries are current.
 *
 *   go mod download k8s.io/kubernetes@v1.37.2  (read its go.mod: go line, godebug, staging modules)
 *     -> <data-dir>/src/kubernetes/{go.mod,tools.go}  (replace k8s.io/<staging> => v0.37.2)
 *     -> go mod tidy -> go build -o bin/ each binary  (progress line per binary; output in build.log)
 *   the same for etcd, containerd, kwok and local-path-provisioner (modules of their own: each pins its own
 *   gRPC/otel/k8s.io versions; local-path-provisioner without cgo, for an image holding only the binary)
 *     -> stamp.json (versions, go version, seconds, sizes; a step not rebuilt keeps its version and seconds)
 *
 * Every go command runs under `nice -n 19` so a build yields to tests running beside it. The module and build
 * caches are Go's own (GOMODCACHE, GOCACHE), so a rebuild after a version bump reuses what did not change.
 */
import { spawn } from "node:child_process";
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { machineCache, machineCacheKey } from "@kvt/images";
import {
  compareGoVersions,
  kubernetesLdflags,
  parseUpstreamGoMod,
  renderContainerdGoMod,
  renderEtcdGoMod,
  renderKubernetesGoMod,
  renderKwokGoMod,
  renderLocalPathGoMod,
  renderToolsGo,
} from "./go-module.ts";
import { KWOK_STAGE_FILES, KWOK_STAGES_FILE, renderKwokStages } from "./kwok.ts";
import {
  BUILD_STEPS,
  type BuildInputs,
  type BuildStamp,
  type BuildStep,
  mergeStamp,
  parseStamp,
  staleSteps,
} from "./stamp.ts";
import {
  type BinarySpec,
  CONTAINERD_BINARIES,
  CONTAINERD_TAGS,
  CONTAINERD_VERSION,
  ETCD_BINARIES,
  ETCD_VERSION,
  KUBERNETES_BINARIES,
  KUBERNETES_VERSION,
  KWOK_BINARIES,
  KWOK_VERSION,
  LOCAL_PATH_BINARIES,
  LOCAL_PATH_VERSION,
} from "./versions.ts";

/** The repository's default data directory for this tool (git-ignored). */
export const DEFAULT_DATA_DIR = new URL("../../../.data/kube", import.meta.url).pathname;

/** The code that decides how the binaries are built: part of their machine cache key. */
const BUILDER_SOURCES = ["build.ts", "go-module.ts", "kwok.ts", "stamp.ts", "versions.ts"].map(
  (f) => new URL(f, import.meta.url).pathname,
);

/** Where the binaries of `kubernetesVersion` live under `dataDir`. */
export function binDir(dataDir: string, kubernetesVersion = KUBERNETES_VERSION): string {
  return join(dataDir, "bin", kubernetesVersion);
}

/** Each build step's pinned version. */
export const PINNED: Readonly<Record<BuildStep, string>> = {
  kubernetes: KUBERNETES_VERSION,
  etcd: ETCD_VERSION,
  containerd: CONTAINERD_VERSION,
  kwok: KWOK_VERSION,
  "local-path": LOCAL_PATH_VERSION,
};

/** Each build step's binaries. */
export const STEP_BINARIES: Readonly<Record<BuildStep, readonly BinarySpec[]>> = {
  kubernetes: KUBERNETES_BINARIES,
  etcd: ETCD_BINARIES,
  containerd: CONTAINERD_BINARIES,
  kwok: KWOK_BINARIES,
  "local-path": LOCAL_PATH_BINARIES,
};

/** Every binary the build makes, by file name. */
export const ALL_BINARIES: readonly string[] = BUILD_STEPS.flatMap((s) => STEP_BINARIES[s].map((b) => b.name));

/** A build step failed; the message says what failed, where the log is and what to do next. */
export class KubeBuildError extends Error {
  override readonly name = "KubeBuildError";
}

export interface BuildOptions {
  readonly dataDir?: string;
  /** Rebuild even when the stamp is current. */
  readonly force?: boolean;
  /** Progress lines (default: stdout with a `[kube]` prefix). */
  readonly log?: (line: string) => void;
}

export interface BuildResult {
  readonly binDir: string;
  readonly stamp: BuildStamp;
  /** True when the stamp was current and nothing was built. */
  readonly skipped: boolean;
}

/** The current stamp of `dataDir`'s binaries, if any. */
export function readStamp(dataDir: string): BuildStamp | undefined {
  const file = join(binDir(dataDir), "stamp.json");
  return existsSync(file) ? parseStamp(readFileSync(file, "utf8")) : undefined;
}

/** Whether the pinned binaries are built (stamp present with the pinned versions and every binary there). */
export function binariesReady(dataDir: string): boolean {
  const stamp = readStamp(dataDir);
  if (!stamp || BUILD_STEPS.some((step) => stamp[step] !== PINNED[step])) return false;
  return [...ALL_BINARIES, KWOK_STAGES_FILE].every((b) => existsSync(join(binDir(dataDir), b)));
}

/** Builds the steps whose pinned version, Go or binaries the stamp does not match (all with `force`). */
export async function buildKube(options: BuildOptions = {}): Promise<BuildResult> {
  const dataDir = options.dataDir ?? DEFAULT_DATA_DIR;
  const log = options.log ?? ((line: string) => void process.stdout.write(`[kube] ${line}\n`));
  const bin = binDir(dataDir);
  mkdirSync(bin, { recursive: true });
  const buildLog = join(dataDir, "build.log");
  const go = new GoRunner(buildLog);

  const goVersion = (await go.output(["env", "GOVERSION"], dataDir)).trim();
  const want: BuildInputs = { ...PINNED, go: goVersion };
  const current = readStamp(dataDir);
  const names = Object.fromEntries(BUILD_STEPS.map((s) => [s, STEP_BINARIES[s].map((b) => b.name)])) as Record<
    BuildStep,
    string[]
  >;
  names.kwok.push(KWOK_STAGES_FILE);
  const stale = options.force
    ? Object.fromEntries(BUILD_STEPS.map((s) => [s, "--force"]))
    : staleSteps(current, want, names, (b) => existsSync(join(bin, b)));
  const todo = BUILD_STEPS.filter((s) => stale[s] !== undefined);
  // A fresh clone of the project (each CI run) restores the binaries another clone linked from the same pins and the
  // same build code, rather than linking them again (minutes of CPU even with Go's build cache warm).
  const cache = machineCache("kube-bin", { log });
  const cacheKey = machineCacheKey([JSON.stringify(want), ...ALL_BINARIES, KWOK_STAGES_FILE], BUILDER_SOURCES);
  if (current && todo.length === 0) {
    log(`binaries current in ${bin} (${BUILD_STEPS.map((s) => `${s} ${current[s]}`).join(", ")}, ${current.go})`);
    cache.save(cacheKey, bin); // a no-op when the machine has them already
    return { binDir: bin, stamp: current, skipped: true };
  }
  if (!options.force && cache.restore(cacheKey, bin) && binariesReady(dataDir)) {
    const restored = readStamp(dataDir);
    if (restored) return { binDir: bin, stamp: restored, skipped: true };
  }
  log(`building into ${bin}: ${todo.map((s) => `${s} (${stale[s]})`).join(", ")}; go output goes to ${buildLog}`);
  writeFileSync(buildLog, "");

  const seconds: Partial<Record<BuildStep, number>> = {};
  const srcRoot = join(dataDir, "src");
  mkdirSync(srcRoot, { recursive: true });
  for (const step of todo) {
    const started = Date.now();
    await STEPS[step]({ go, goVersion, srcRoot, bin, log });
    seconds[step] = elapsed(started);
  }

  const sizes: Record<string, number> = {};
  for (const b of ALL_BINARIES) sizes[b] = statSync(join(bin, b)).size;
  const stamp = mergeStamp(current, want, seconds, sizes, new Date().toISOString());
  const tmp = join(bin, `stamp.json.${process.pid}`);
  writeFileSync(tmp, `${JSON.stringify(stamp, null, 2)}\n`);
  renameSync(tmp, join(bin, "stamp.json"));
  const total = Object.values(sizes).reduce((a, b) => a + b, 0);
  const steps = Object.entries(seconds).map(([k, v]) => `${k} ${v} s`);
  const sum = Object.values(seconds).reduce((a, b) => a + b, 0);
  log(`built in ${sum} s (${steps.join(", ")}), ${mib(total)} MiB`);
  cache.save(cacheKey, bin);
  return { binDir: bin, stamp, skipped: false };
}

interface StepContext {
  readonly go: GoRunner;
  readonly goVersion: string;
  readonly srcRoot: string;
  readonly bin: string;
  readonly log: (line: string) => void;
}

/** How each step builds: download the module, check its Go, write our main module, tidy, build its binaries. */
const STEPS: Readonly<Record<BuildStep, (c: StepContext) => Promise<void>>> = {
  // Kubernetes: its go.mod says which Go it needs and which staging modules to replace.
  async kubernetes({ go, goVersion, srcRoot, bin, log }) {
    log(`kubernetes ${KUBERNETES_VERSION}: downloading the module`);
    const upstream = parseUpstreamGoMod(await go.moduleGoMod(`k8s.io/kubernetes@${KUBERNETES_VERSION}`, srcRoot));
    checkGo(goVersion, upstream.go, `k8s.io/kubernetes ${KUBERNETES_VERSION}`);
    const src = join(srcRoot, "kubernetes");
    writeModule(src, renderKubernetesGoMod(KUBERNETES_VERSION, upstream), KUBERNETES_BINARIES);
    log(`kubernetes: ${upstream.stagingModules.length} staging modules replaced; go mod tidy (downloads dependencies)`);
    await go.run(["mod", "tidy"], src, "go mod tidy (kubernetes)");
    const flags = ["-ldflags", kubernetesLdflags(KUBERNETES_VERSION)];
    await buildBinaries(go, src, bin, KUBERNETES_BINARIES, { flags }, log);
  },
  async etcd({ go, goVersion, srcRoot, bin, log }) {
    log(`etcd ${ETCD_VERSION}: downloading the modules`);
    const upstream = parseUpstreamGoMod(await go.moduleGoMod(`go.etcd.io/etcd/server/v3@${ETCD_VERSION}`, srcRoot));
    checkGo(goVersion, upstream.go, `go.etcd.io/etcd/server/v3 ${ETCD_VERSION}`);
    const src = join(srcRoot, "etcd");
    writeModule(src, renderEtcdGoMod(ETCD_VERSION, upstream.go), ETCD_BINARIES);
    await go.run(["mod", "tidy"], src, "go mod tidy (etcd)");
    await buildBinaries(go, src, bin, ETCD_BINARIES, { flags: ["-ldflags", "-s -w"] }, log);
  },
  async containerd({ go, goVersion, srcRoot, bin, log }) {
    log(`containerd ${CONTAINERD_VERSION}: downloading the module`);
    const module = `github.com/containerd/containerd/v2@${CONTAINERD_VERSION}`;
    const upstream = parseUpstreamGoMod(await go.moduleGoMod(module, srcRoot));
    checkGo(goVersion, upstream.go, `github.com/containerd/containerd/v2 ${CONTAINERD_VERSION}`);
    const src = join(srcRoot, "containerd");
    writeModule(src, renderContainerdGoMod(CONTAINERD_VERSION, upstream.go), CONTAINERD_BINARIES);
    await go.run(["mod", "tidy"], src, "go mod tidy (containerd)");
    const flags = ["-tags", CONTAINERD_TAGS, "-ldflags", "-s -w"];
    await buildBinaries(go, src, bin, CONTAINERD_BINARIES, { flags }, log);
  },
  // kwok: the controller, and its Stage files from the same module (kwok.ts) beside it.
  async kwok({ go, goVersion, srcRoot, bin, log }) {
    log(`kwok ${KWOK_VERSION}: downloading the module`);
    const module = await go.module(`sigs.k8s.io/kwok@${KWOK_VERSION}`, srcRoot);
    const upstream = parseUpstreamGoMod(module.goMod);
    checkGo(goVersion, upstream.go, `sigs.k8s.io/kwok ${KWOK_VERSION}`);
    const src = join(srcRoot, "kwok");
    writeModule(src, renderKwokGoMod(KWOK_VERSION, upstream.go), KWOK_BINARIES);
    await go.run(["mod", "tidy"], src, "go mod tidy (kwok)");
    await buildBinaries(go, src, bin, KWOK_BINARIES, { flags: ["-ldflags", "-s -w"] }, log);
    const stages = KWOK_STAGE_FILES.map((path) => ({ path, text: readFileSync(join(module.dir, path), "utf8") }));
    writeFileSync(join(bin, KWOK_STAGES_FILE), renderKwokStages(stages));
    log(`kwok: ${stages.length} Stages in ${KWOK_STAGES_FILE}`);
  },
  // local-path-provisioner: static (no cgo), as its image is the binary alone (local-path.ts).
  async "local-path"({ go, goVersion, srcRoot, bin, log }) {
    log(`local-path-provisioner ${LOCAL_PATH_VERSION}: downloading the module`);
    const module = `github.com/rancher/local-path-provisioner@${LOCAL_PATH_VERSION}`;
    const upstream = parseUpstreamGoMod(await go.moduleGoMod(module, srcRoot));
    checkGo(goVersion, upstream.go, `github.com/rancher/local-path-provisioner ${LOCAL_PATH_VERSION}`);
    const src = join(srcRoot, "local-path");
    writeModule(src, renderLocalPathGoMod(LOCAL_PATH_VERSION, upstream.go), LOCAL_PATH_BINARIES);
    await go.run(["mod", "tidy"], src, "go mod tidy (local-path-provisioner)");
    const ldflags = `-s -w -X main.VERSION=${LOCAL_PATH_VERSION}`;
    const how = { flags: ["-ldflags", ldflags], env: { CGO_ENABLED: "0" } };
    await buildBinaries(go, src, bin, LOCAL_PATH_BINARIES, how, log);
  },
};

function writeModule(dir: string, goMod: string, binaries: readonly BinarySpec[]): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "go.mod"), goMod);
  writeFileSync(join(dir, "tools.go"), renderToolsGo(binaries));
}

async function buildBinaries(
  go: GoRunner,
  src: string,
  bin: string,
  binaries: readonly BinarySpec[],
  how: { readonly flags: readonly string[]; readonly env?: Readonly<Record<string, string>> },
  log: (line: string) => void,
): Promise<void> {
  const { flags, env = {} } = how;
  for (const [i, b] of binaries.entries()) {
    const started = Date.now();
    log(`building ${b.name} (${i + 1}/${binaries.length}) from ${b.pkg}`);
    const out = join(bin, b.name);
    await go.run(["build", "-trimpath", ...flags, "-o", `${out}.tmp`, b.pkg], src, `go build ${b.pkg}`, env);
    renameSync(`${out}.tmp`, out);
    log(`built ${b.name}: ${mib(statSync(out).size)} MiB in ${elapsed(started)} s`);
  }
}

function checkGo(have: string, need: string, what: string): void {
  if (compareGoVersions(have, need) >= 0) return;
  throw new KubeBuildError(
    `${what} needs go >= ${need}, and this machine's go is ${have}. ` +
      "Next: export GOTOOLCHAIN=go1.27.3 (the go command then takes that toolchain from the Go module proxy) " +
      "and run `npm run kube -- build` again.",
  );
}

const elapsed = (since: number): number => Math.round((Date.now() - since) / 1000);
const mib = (bytes: number): string => (bytes / 1024 / 1024).toFixed(1);

/** Runs go commands under `nice -n 19`, their output appended to the build log. */
class GoRunner {
  readonly #log: string;
  constructor(logFile: string) {
    this.#log = logFile;
  }

  /** The go.mod text of `moduleAtVersion`, downloading the module into the module cache. */
  async moduleGoMod(moduleAtVersion: string, cwd: string): Promise<string> {
    return (await this.module(moduleAtVersion, cwd)).goMod;
  }

  /** The go.mod text and the extracted directory of `moduleAtVersion`, downloading it into the module cache. */
  async module(moduleAtVersion: string, cwd: string): Promise<{ goMod: string; dir: string }> {
    const json = await this.output(["mod", "download", "-json", moduleAtVersion], cwd);
    const info = JSON.parse(json) as { GoMod?: string; Dir?: string; Error?: string };
    if (info.Error || !info.GoMod || !info.Dir) {
      throw new KubeBuildError(
        `go mod download ${moduleAtVersion} failed: ${info.Error ?? "no go.mod"}. ` +
          `Next: check \`go env GOPROXY\` reaches the Go module proxy, then run \`npm run kube -- build\` again.`,
      );
    }
    return { goMod: readFileSync(info.GoMod, "utf8"), dir: info.Dir };
  }

  /** Runs `go args` in `cwd` and returns its stdout. */
  async output(args: readonly string[], cwd: string): Promise<string> {
    let stdout = "";
    await this.#spawn(args, cwd, `go ${args.join(" ")}`, (chunk) => {
      stdout += chunk;
    });
    return stdout;
  }

  /** Runs `go args` in `cwd` (with `extraEnv` added to the environment), its output into the build log. */
  async run(args: readonly string[], cwd: string, what: string, extraEnv: Readonly<Record<string, string>> = {}) {
    await this.#spawn(args, cwd, what, undefined, extraEnv);
  }

  #spawn(
    args: readonly string[],
    cwd: string,
    what: string,
    onStdout?: (chunk: string) => void,
    extraEnv: Readonly<Record<string, string>> = {},
  ): Promise<void> {
    const fd = openSync(this.#log, "a");
    const envText = Object.entries(extraEnv).map(([k, v]) => `${k}=${v} `);
    writeFileSync(fd, `\n$ (cd ${cwd} && ${envText.join("")}go ${args.join(" ")})\n`);
    const env = { ...process.env, ...extraEnv, GOFLAGS: `${process.env.GOFLAGS ?? ""} -mod=mod`.trim() };
    const child = spawn("nice", ["-n", "19", "go", ...args], {
      cwd,
      env,
      stdio: ["ignore", onStdout ? "pipe" : fd, fd],
    });
    closeSync(fd);
    child.stdout?.setEncoding("utf8").on("data", onStdout ?? (() => undefined));
    return new Promise((resolve, reject) => {
      child.once("error", (error) =>
        reject(new KubeBuildError(`${what}: cannot run go (${error.message}). Next: install Go >= 1.26 on PATH.`)),
      );
      child.once("exit", (code) => {
        if (code === 0) return resolve();
        const tail = readFileSync(this.#log, "utf8").trimEnd().split("\n").slice(-15).join("\n  ");
        reject(
          new KubeBuildError(
            `${what} failed (exit ${code}) in ${cwd}; the last lines of ${this.#log}:\n  ${tail}\n` +
              "Next: a download error means the Go module proxy was unreachable or refused a version (check " +
              "`go env GOPROXY` and the versions in tools/kube/src/versions.ts); a compile error means the pinned " +
              "release needs a newer Go (GOTOOLCHAIN) or another version pin. Fix it and run `npm run kube -- build` again.",
          ),
        );
      });
    });
  }
}
