/**
 * ccache for native/'s C++ builds (native/cc.mk compiles through it when it is on PATH). CI clones the project afresh
 * each run, so its git-ignored build folders start empty; ccache keeps the objects in its own cache on the machine
 * (~/.cache/ccache), as Go keeps its build cache for the kube lane, and a clone that compiles the same sources again
 * takes seconds instead of about 4 minutes of CPU. Installed like the project's other Debian programs; a machine where
 * it cannot be installed builds without it.
 */
import { type EnsureHostTools, ensureHostTools, type HostTool } from "@kvt/runtime";

export const CCACHE: HostTool = { bin: "ccache", pkg: "ccache" };

/** Installs ccache when missing; resolves with a line saying why it is not used when that fails, else undefined. */
export async function ensureCompilerCache(
  log: (line: string) => void,
  ensure: EnsureHostTools = ensureHostTools,
): Promise<string | undefined> {
  try {
    await ensure([CCACHE], log);
    return undefined;
  } catch (err) {
    return `native/ builds without ccache (every C++ file compiles again): ${(err as Error).message}`;
  }
}
