/**
 * The one installer of the Debian programs a process runs on its host (QEMU for the launcher's emulation backend,
 * mmdebstrap and skopeo for the image tools, the ISO readers and qemu-img for tests...). Programs are looked up on
 * PATH in process (the launcher image has no shell to ask `command -v`); the missing ones' packages are installed in
 * one apt-get call when this process is root (the project's CI machine is: Debian 12, root), else the error names the
 * command to run.
 *
 *   ensureHostTools(tools) --all on PATH--> done
 *        | missing packages P (their union, each once)
 *        |--not root--> HostToolError("... as root run: apt-get install -y --no-install-recommends P")
 *        |--some of P being installed by another call of this process--> wait for that call
 *        v
 *   apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends P   (waits for another process's dpkg lock)
 *        |--fails--> apt-get update, then the install once more (stale package lists on a fresh machine)
 *        v
 *   every program on PATH now, else HostToolError naming the command
 */
import { spawn } from "node:child_process";
import { accessSync, constants, statSync } from "node:fs";
import { join } from "node:path";

/** A program and the Debian package that provides it. */
export interface HostTool {
  /** The program's file name, looked up on PATH. */
  readonly bin: string;
  /** The Debian package that installs it. */
  readonly pkg: string;
}

/** A host program is missing, could not be installed, or failed; `command`, when set, is what a user runs to fix it. */
export class HostToolError extends Error {
  override name = "HostToolError";
  /** The shell command that installs what is missing (run as root), when the error is about missing programs. */
  readonly command?: string;
  constructor(message: string, options: { command?: string; cause?: unknown } = {}) {
    super(options.command ? `${message}; as root run: ${options.command}` : message, { cause: options.cause });
    this.command = options.command;
  }
}

/** Runs apt-get with `args`; resolves when it exits 0, rejects with an Error carrying the end of its stderr. */
export type AptRunner = (args: readonly string[]) => Promise<void>;

/** What {@link hostToolInstaller} reaches the host through; each defaults to the real one. */
export interface HostToolDeps {
  /** Runs apt-get (default: spawns it with DEBIAN_FRONTEND=noninteractive, no shell). */
  readonly runApt?: AptRunner;
  /** Whether apt-get may be run (default: this process runs as uid 0). */
  readonly isRoot?: () => boolean;
  /** The PATH the programs are looked up on (default: `process.env.PATH` at each call). */
  readonly path?: () => string;
}

/** Installs the Debian packages of the `tools` missing on PATH; `log` is told what is installed and retried. */
export type EnsureHostTools = (tools: readonly HostTool[], log?: (line: string) => void) => Promise<void>;

const DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/** Another install may hold dpkg's lock (tests and builds install in parallel on a fresh machine): wait for it. */
const LOCK = ["-o", "DPkg::Lock::Timeout=600"];

/**
 * Whether `bin` is an executable regular file in a directory of `path` (a PATH string), looked up in process. A
 * `bin` holding a slash names a file the package installs, a program or not (`/usr/lib/x86_64-linux-gnu/libc.a` of
 * libc6-dev): it only has to be a regular file there.
 */
export function onPath(bin: string, path: string = process.env.PATH ?? DEFAULT_PATH): boolean {
  if (bin.includes("/")) return isFile(bin);
  return path.split(":").some((dir) => {
    if (dir === "") return false;
    const file = join(dir, bin);
    try {
      accessSync(file, constants.X_OK);
      return isFile(file);
    } catch {
      return false; // not there, or not executable: try the next directory
    }
  });
}

function isFile(file: string): boolean {
  try {
    return statSync(file).isFile();
  } catch {
    return false;
  }
}

/** The shell command that installs `pkgs`, as an error message names it. */
function aptInstallCommand(pkgs: readonly string[]): string {
  return `apt-get install -y --no-install-recommends ${pkgs.join(" ")}`;
}

/** Spawns apt-get (no shell: the launcher image has none). */
function spawnAptGet(args: readonly string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
    const child = spawn("apt-get", args, { env, stdio: ["ignore", "ignore", "pipe"] });
    const err: Buffer[] = [];
    child.stderr.on("data", (chunk: Buffer) => err.push(chunk));
    child.on("error", (e) => reject(new Error(`cannot run apt-get: ${e.message}`, { cause: e })));
    child.on("close", (code, signal) => {
      if (code === 0) return resolve();
      const tail = Buffer.concat(err).toString().trim().split("\n").slice(-8).join("\n");
      reject(new Error(`apt-get ${args.join(" ")} failed (${signal ?? `exit ${code}`}): ${tail}`));
    });
  });
}

/** `apt-get install` of `pkgs`; once more after `apt-get update` when it fails. */
async function aptInstall(pkgs: readonly string[], runApt: AptRunner, log: (line: string) => void): Promise<void> {
  const install = [...LOCK, "install", "-y", "--no-install-recommends", ...pkgs];
  log(`installing Debian packages: ${pkgs.join(" ")}`);
  try {
    await runApt(install);
  } catch (first) {
    // Stale package lists are the usual cause on a fresh machine: refresh them once and retry.
    log(`apt-get install failed (${(first as Error).message.split("\n")[0]}); running apt-get update and retrying`);
    await runApt([...LOCK, "update"]);
    await runApt(install);
  }
}

/**
 * An installer reaching the host through `deps` (tests inject a runner). Concurrent calls share the installs: a
 * package another call of this installer is installing is waited for, not installed twice.
 */
export function hostToolInstaller(deps: HostToolDeps = {}): EnsureHostTools {
  const runApt = deps.runApt ?? spawnAptGet;
  const isRoot = deps.isRoot ?? ((): boolean => process.getuid?.() === 0);
  const path = deps.path ?? ((): string => process.env.PATH ?? DEFAULT_PATH);
  const installing = new Map<string, Promise<void>>();

  const missingOf = (tools: readonly HostTool[]): HostTool[] => tools.filter((t) => !onPath(t.bin, path()));
  const packagesOf = (tools: readonly HostTool[]): string[] => [...new Set(tools.map((t) => t.pkg))];
  const namesOf = (tools: readonly HostTool[]): string => [...new Set(tools.map((t) => t.bin))].join(", ");

  /** Starts one install of `pkgs` and marks each as being installed until it settles. */
  const start = (pkgs: readonly string[], log: (line: string) => void): Promise<void> => {
    const install = aptInstall(pkgs, runApt, log);
    for (const p of pkgs) installing.set(p, install);
    const settled = (): void => {
      for (const p of pkgs) if (installing.get(p) === install) installing.delete(p);
    };
    install.then(settled, settled);
    return install;
  };

  return async (tools, log = () => {}) => {
    const missing = missingOf(tools);
    if (missing.length === 0) return;
    const pkgs = packagesOf(missing);
    const command = aptInstallCommand(pkgs);
    if (!isRoot())
      throw new HostToolError(`${namesOf(missing)} not installed (Debian: ${pkgs.join(" ")})`, { command });
    const waits = new Set(pkgs.flatMap((p) => installing.get(p) ?? []));
    const fresh = pkgs.filter((p) => !installing.has(p));
    if (fresh.length > 0) waits.add(start(fresh, log));
    const failed = (await Promise.allSettled(waits)).find((r) => r.status === "rejected");
    if (failed) {
      const detail = (failed.reason as Error).message;
      throw new HostToolError(`Cannot install ${pkgs.join(" ")} for ${namesOf(missing)}: ${detail}`, {
        command: `apt-get update && ${command}`,
        cause: failed.reason,
      });
    }
    const still = missingOf(missing);
    if (still.length > 0) {
      const owners = packagesOf(still).join(" ");
      throw new HostToolError(
        `${namesOf(still)} still not on PATH (${path()}) after installing ${owners}: \`dpkg -L ${owners}\` lists what it installed`,
      );
    }
  };
}

/**
 * Makes sure every program of `tools` is on PATH, installing the missing ones' packages with apt-get (root only);
 * throws {@link HostToolError} naming the command to run otherwise. May be called concurrently: one install per
 * package per process.
 */
export const ensureHostTools: EnsureHostTools = hostToolInstaller();
