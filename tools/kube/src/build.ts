/**
 * `npm run kube -- build`: compiles the pinned Kubernetes and etcd binaries from the Go module proxy into
 * `<data-dir>/bin/<kubernetes-version>/`, and skips when its stamp says they are current.
 *
 *   go mod download k8s.io/kubernetes@v1.37.2  (read its go.mod: go line, godebug, staging modules)
 *     -> <data-dir>/src/kubernetes/{go.mod,tools.go}  (replace k8s.io/<staging> => v0.37.2)
 *     -> go mod tidy -> go build -o bin/ each binary  (progress line per binary; output in build.log)
 *   the same for etcd and for containerd (modules of their own: each pins its own gRPC/otel versions)
 *     -> stamp.json (versions, go version, seconds, sizes)
 *
 * Every go command runs under `nice -n 19` so a build yields to tests running beside it. The module and build
 * caches are Go's own (GOMODCACHE, GOCACHE), so a rebuild after a version bump reuses what did not change.
 */
import { spawn } from "node:child_process";
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  compareGoVersions,
  kubernetesLdflags,
  parseUpstreamGoMod,
  renderContainerdGoMod,
  renderEtcdGoMod,
  renderKubernetesGoMod,
  renderToolsGo,
} from "./go-module.ts";
import { type BuildInputs, type BuildStamp, parseStamp, staleReason } from "./stamp.ts";
import {
  type BinarySpec,
  CONTAINERD_BINARIES,
  CONTAINERD_TAGS,
  CONTAINERD_VERSION,
  ETCD_BINARIES,
  ETCD_VERSION,
  KUBERNETES_BINARIES,
  KUBERNETES_VERSION,
} from "./versions.ts";

/** The repository's default data directory for this tool (git-ignored). */
export const DEFAULT_DATA_DIR = new URL("../../../.data/kube", import.meta.url).pathname;

/** Where the binaries of `kubernetesVersion` live under `dataDir`. */
export function binDir(dataDir: string, kubernetesVersion = KUBERNETES_VERSION): string {
  return join(dataDir, "bin", kubernetesVersion);
}

/** Every binary the build makes, by file name. */
export const ALL_BINARIES: readonly string[] = [...KUBERNETES_BINARIES, ...ETCD_BINARIES, ...CONTAINERD_BINARIES].map(
  (b) => b.name,
);

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
  if (!stamp || stamp.kubernetes !== KUBERNETES_VERSION || stamp.etcd !== ETCD_VERSION) return false;
  if (stamp.containerd !== CONTAINERD_VERSION) return false;
  return ALL_BINARIES.every((b) => existsSync(join(binDir(dataDir), b)));
}

/** Builds the pinned binaries unless the stamp says they are current. */
export async function buildKube(options: BuildOptions = {}): Promise<BuildResult> {
  const dataDir = options.dataDir ?? DEFAULT_DATA_DIR;
  const log = options.log ?? ((line: string) => void process.stdout.write(`[kube] ${line}\n`));
  const bin = binDir(dataDir);
  mkdirSync(bin, { recursive: true });
  const buildLog = join(dataDir, "build.log");
  const go = new GoRunner(buildLog);

  const goVersion = (await go.output(["env", "GOVERSION"], dataDir)).trim();
  const want: BuildInputs = {
    kubernetes: KUBERNETES_VERSION,
    etcd: ETCD_VERSION,
    containerd: CONTAINERD_VERSION,
    go: goVersion,
  };
  const current = readStamp(dataDir);
  const reason = options.force ? "--force" : staleReason(current, want, ALL_BINARIES, (b) => existsSync(join(bin, b)));
  if (current && !reason) {
    log(
      `binaries current in ${bin} (kubernetes ${current.kubernetes}, etcd ${current.etcd}, ` +
        `containerd ${current.containerd}, ${current.go})`,
    );
    return { binDir: bin, stamp: current, skipped: true };
  }
  log(`building into ${bin}: ${reason}; go output goes to ${buildLog}`);
  writeFileSync(buildLog, "");

  const seconds: Record<string, number> = {};
  const srcRoot = join(dataDir, "src");
  mkdirSync(srcRoot, { recursive: true });

  // Kubernetes: its go.mod says which Go it needs and which staging modules to replace.
  let started = Date.now();
  log(`kubernetes ${KUBERNETES_VERSION}: downloading the module`);
  const upstreamText = await go.moduleGoMod(`k8s.io/kubernetes@${KUBERNETES_VERSION}`, srcRoot);
  const upstream = parseUpstreamGoMod(upstreamText);
  checkGo(goVersion, upstream.go, `k8s.io/kubernetes ${KUBERNETES_VERSION}`);
  const kubeSrc = join(srcRoot, "kubernetes");
  writeModule(kubeSrc, renderKubernetesGoMod(KUBERNETES_VERSION, upstream), KUBERNETES_BINARIES);
  log(`kubernetes: ${upstream.stagingModules.length} staging modules replaced; go mod tidy (downloads dependencies)`);
  await go.run(["mod", "tidy"], kubeSrc, "go mod tidy (kubernetes)");
  await buildBinaries(go, kubeSrc, bin, KUBERNETES_BINARIES, ["-ldflags", kubernetesLdflags(KUBERNETES_VERSION)], log);
  seconds.kubernetes = elapsed(started);

  started = Date.now();
  log(`etcd ${ETCD_VERSION}: downloading the modules`);
  const etcdUpstream = parseUpstreamGoMod(await go.moduleGoMod(`go.etcd.io/etcd/server/v3@${ETCD_VERSION}`, srcRoot));
  checkGo(goVersion, etcdUpstream.go, `go.etcd.io/etcd/server/v3 ${ETCD_VERSION}`);
  const etcdSrc = join(srcRoot, "etcd");
  writeModule(etcdSrc, renderEtcdGoMod(ETCD_VERSION, etcdUpstream.go), ETCD_BINARIES);
  await go.run(["mod", "tidy"], etcdSrc, "go mod tidy (etcd)");
  await buildBinaries(go, etcdSrc, bin, ETCD_BINARIES, ["-ldflags", "-s -w"], log);
  seconds.etcd = elapsed(started);

  started = Date.now();
  log(`containerd ${CONTAINERD_VERSION}: downloading the module`);
  const ctrUpstream = parseUpstreamGoMod(
    await go.moduleGoMod(`github.com/containerd/containerd/v2@${CONTAINERD_VERSION}`, srcRoot),
  );
  checkGo(goVersion, ctrUpstream.go, `github.com/containerd/containerd/v2 ${CONTAINERD_VERSION}`);
  const ctrSrc = join(srcRoot, "containerd");
  writeModule(ctrSrc, renderContainerdGoMod(CONTAINERD_VERSION, ctrUpstream.go), CONTAINERD_BINARIES);
  await go.run(["mod", "tidy"], ctrSrc, "go mod tidy (containerd)");
  await buildBinaries(go, ctrSrc, bin, CONTAINERD_BINARIES, ["-tags", CONTAINERD_TAGS, "-ldflags", "-s -w"], log);
  seconds.containerd = elapsed(started);

  const sizes: Record<string, number> = {};
  for (const b of ALL_BINARIES) sizes[b] = statSync(join(bin, b)).size;
  const stamp: BuildStamp = { ...want, seconds, sizes, builtAt: new Date().toISOString() };
  const tmp = join(bin, `stamp.json.${process.pid}`);
  writeFileSync(tmp, `${JSON.stringify(stamp, null, 2)}\n`);
  renameSync(tmp, join(bin, "stamp.json"));
  const total = Object.values(sizes).reduce((a, b) => a + b, 0);
  const steps = Object.entries(seconds).map(([k, v]) => `${k} ${v} s`);
  const sum = Object.values(seconds).reduce((a, b) => a + b, 0);
  log(`built in ${sum} s (${steps.join(", ")}), ${mib(total)} MiB`);
  return { binDir: bin, stamp, skipped: false };
}

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
  flags: readonly string[],
  log: (line: string) => void,
): Promise<void> {
  for (const [i, b] of binaries.entries()) {
    const started = Date.now();
    log(`building ${b.name} (${i + 1}/${binaries.length}) from ${b.pkg}`);
    const out = join(bin, b.name);
    await go.run(["build", "-trimpath", ...flags, "-o", `${out}.tmp`, b.pkg], src, `go build ${b.pkg}`);
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
    const json = await this.output(["mod", "download", "-json", moduleAtVersion], cwd);
    const info = JSON.parse(json) as { GoMod?: string; Error?: string };
    if (info.Error || !info.GoMod) {
      throw new KubeBuildError(
        `go mod download ${moduleAtVersion} failed: ${info.Error ?? "no go.mod"}. ` +
          `Next: check \`go env GOPROXY\` reaches the Go module proxy, then run \`npm run kube -- build\` again.`,
      );
    }
    return readFileSync(info.GoMod, "utf8");
  }

  /** Runs `go args` in `cwd` and returns its stdout. */
  async output(args: readonly string[], cwd: string): Promise<string> {
    let stdout = "";
    await this.#spawn(args, cwd, `go ${args.join(" ")}`, (chunk) => {
      stdout += chunk;
    });
    return stdout;
  }

  /** Runs `go args` in `cwd`, its output into the build log. */
  async run(args: readonly string[], cwd: string, what: string): Promise<void> {
    await this.#spawn(args, cwd, what);
  }

  #spawn(args: readonly string[], cwd: string, what: string, onStdout?: (chunk: string) => void): Promise<void> {
    const fd = openSync(this.#log, "a");
    writeFileSync(fd, `\n$ (cd ${cwd} && go ${args.join(" ")})\n`);
    const env = { ...process.env, GOFLAGS: `${process.env.GOFLAGS ?? ""} -mod=mod`.trim() };
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
