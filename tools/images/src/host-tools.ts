/**
 * The Debian programs the image build, the push and the test run, and the one place that runs them. Missing ones are
 * installed with apt-get when this process is root (the project's CI machine is: Debian 12, root), else the error
 * names the command that installs them. apt keeps the .debs in its own cache, so a second install costs nothing.
 */
import { spawn, spawnSync } from "node:child_process";

/** A program and the Debian package that provides it. */
export interface HostTool {
  readonly bin: string;
  readonly pkg: string;
}

/** What `npm run images -- build` needs. */
export const BUILD_TOOLS: readonly HostTool[] = [
  { bin: "mmdebstrap", pkg: "mmdebstrap" },
  { bin: "umoci", pkg: "umoci" },
  { bin: "readelf", pkg: "binutils" },
  { bin: "strip", pkg: "binutils" },
];

/** What `npm run images -- push` needs. */
export const PUSH_TOOLS: readonly HostTool[] = [{ bin: "skopeo", pkg: "skopeo" }];

/** What the registry round-trip test needs besides the build and push tools. */
export const TEST_TOOLS: readonly HostTool[] = [
  { bin: "docker-registry", pkg: "docker-registry" },
  { bin: "crun", pkg: "crun" },
  { bin: "runc", pkg: "runc" },
];

/** A host program failed (or is missing); `message` carries its command line and the end of its stderr. */
export class HostToolError extends Error {
  override name = "HostToolError";
}

function onPath(bin: string): boolean {
  return spawnSync("sh", ["-c", `command -v ${bin}`], { stdio: "ignore" }).status === 0;
}

/** Installs the missing `tools` with apt-get (root only); throws {@link HostToolError} naming the fix otherwise. */
export async function ensureHostTools(tools: readonly HostTool[], log: (line: string) => void): Promise<void> {
  const missing = [...new Set(tools.filter((t) => !onPath(t.bin)).map((t) => t.pkg))];
  if (missing.length === 0) return;
  const fix = `apt-get install -y --no-install-recommends ${missing.join(" ")}`;
  if (process.getuid?.() !== 0) throw new HostToolError(`Missing Debian packages; as root run: ${fix}`);
  log(`installing Debian packages: ${missing.join(" ")}`);
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  // Another install may hold dpkg's lock (tests and builds install in parallel on a fresh machine): wait for it.
  const lock = ["-o", "DPkg::Lock::Timeout=600"];
  const args = [...lock, "install", "-y", "--no-install-recommends", ...missing];
  try {
    await run("apt-get", args, { env });
  } catch {
    // Stale package lists are the usual cause on a fresh machine: refresh them once and retry.
    await run("apt-get", [...lock, "update"], { env });
    await run("apt-get", args, { env });
  }
}

/** Options of {@link run}. */
export interface RunOptions {
  readonly cwd?: string;
  readonly env?: NodeJS.ProcessEnv;
  /** Called with each line of stdout as it arrives (progress output). */
  readonly onLine?: (line: string) => void;
}

/** Runs `cmd` and resolves with its stdout; rejects with a {@link HostToolError} on a non-zero exit. */
export function run(cmd: string, args: readonly string[], options: RunOptions = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: options.cwd, env: options.env, stdio: ["ignore", "pipe", "pipe"] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let pending = "";
    child.stdout.on("data", (chunk: Buffer) => {
      out.push(chunk);
      if (!options.onLine) return;
      pending += chunk.toString();
      const lines = pending.split("\n");
      pending = lines.pop() ?? "";
      for (const line of lines) if (line.trim()) options.onLine(line);
    });
    child.stderr.on("data", (chunk: Buffer) => err.push(chunk));
    child.on("error", (e) => reject(new HostToolError(`Cannot run ${cmd}: ${e.message}`, { cause: e })));
    child.on("close", (code, signal) => {
      if (code === 0) return resolve(Buffer.concat(out).toString());
      const tail = Buffer.concat(err).toString().trim().split("\n").slice(-8).join("\n");
      reject(new HostToolError(`${cmd} ${args.join(" ")} failed (${signal ?? `exit ${code}`}):\n${tail}`));
    });
  });
}
