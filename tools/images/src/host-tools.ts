/**
 * The Debian programs the image build, the push and the test run, and the one place that runs them. Missing ones are
 * installed by @kvt/runtime's `ensureHostTools` (apt-get when this process is root, as the project's CI machine is;
 * else the error names the command). apt keeps the .debs in its own cache, so a second install costs nothing.
 */
import { spawn } from "node:child_process";
import { type HostTool, HostToolError } from "@kvt/runtime";

/** The installer and its types live in @kvt/runtime (apps install host programs too); re-exported for the tools. */
export { ensureHostTools, type HostTool, HostToolError } from "@kvt/runtime";

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
