/**
 * Host programs the QEMU backend needs: qemu-system-x86_64 (Debian qemu-system-x86); the NoCloud seed is written
 * in process (seed.ts). When one is missing it is installed with apt-get if we are root; otherwise a clear error names
 * the one command to run.
 */
import { execFile } from "node:child_process";
import { accessSync, constants, statSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** A host program is missing and could not be installed; `command` is what a user runs to fix it. */
export class MissingHostToolError extends Error {
  readonly command: string;
  constructor(tool: string, command: string, detail?: string) {
    super(`${tool} is not installed${detail ? ` (${detail})` : ""}; run: ${command}`);
    this.name = "MissingHostToolError";
    this.command = command;
  }
}

/** A program and the Debian package that provides it. */
export interface HostTool {
  readonly bin: string;
  readonly pkg: string;
}

/** What the QEMU backend needs on the host. */
export const QEMU_TOOLS: readonly HostTool[] = [{ bin: "qemu-system-x86_64", pkg: "qemu-system-x86" }];

/**
 * Whether `bin` is an executable file in a directory of `PATH`, looked up in process: the launcher image has no
 * shell to ask (`command -v`).
 */
export function onPath(bin: string, path: string = process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin"): boolean {
  for (const dir of path.split(":")) {
    if (dir === "") continue;
    try {
      const file = join(dir, bin);
      accessSync(file, constants.X_OK);
      if (statSync(file).isFile()) return true;
    } catch {
      // not in this directory
    }
  }
  return false;
}

function has(bin: string): Promise<boolean> {
  return Promise.resolve(onPath(bin));
}

/** Installs or reports missing tools; `root` says whether apt-get may be run (default: are we uid 0). */
export async function installMissing(
  tools: readonly HostTool[],
  root: boolean = process.getuid?.() === 0,
): Promise<void> {
  const missing: HostTool[] = [];
  for (const t of tools) if (!(await has(t.bin))) missing.push(t);
  if (missing.length === 0) return;
  const pkgs = [...new Set(missing.map((m) => m.pkg))];
  const names = missing.map((m) => m.bin).join(", ");
  if (!root) throw new MissingHostToolError(names, `sudo apt-get install -y ${pkgs.join(" ")}`);
  try {
    await run("apt-get", ["install", "-y", "--no-install-recommends", ...pkgs], { maxBuffer: 64 << 20 });
  } catch (err) {
    throw new MissingHostToolError(
      names,
      `apt-get update && apt-get install -y ${pkgs.join(" ")}`,
      (err as Error).message.split("\n")[0],
    );
  }
}

let ensured: Promise<void> | undefined;

/** Makes sure the QEMU backend's tools are present (once per process; retried after a failure). */
export function ensureHostTools(): Promise<void> {
  ensured ??= installMissing(QEMU_TOOLS);
  const p = ensured;
  p.catch(() => {
    ensured = undefined;
  });
  return p;
}
