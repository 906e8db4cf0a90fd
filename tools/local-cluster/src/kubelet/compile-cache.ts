/**
 * Warms the node's compile cache for virt-launcher, as pulling an image ahead of time would: runs the launcher's
 * entry point once with `--help` (which loads its whole module graph, then exits, and Node writes the compiled
 * code to NODE_COMPILE_CACHE on exit). Launchers are long-lived and only write the cache when they exit, so
 * without this the first launchers of a node never profit from it. Best effort, in the background.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import type { RuntimeLayout } from "./container-spec.ts";

/**
 * Starts the warm-up; resolves when it ended (successfully, or not, or killed when `signal` aborts). A no-op
 * without a compile cache directory.
 */
export function warmLauncherCompileCache(layout: RuntimeLayout, signal: AbortSignal): Promise<void> {
  const cacheDir = layout.compileCacheDir;
  if (!cacheDir) return Promise.resolve();
  const entry = layout.launcherEntry ?? join(layout.projectRoot, "apps/virt-launcher/src/main.ts");
  return new Promise((resolve) => {
    const child = spawn(layout.execPath, [...layout.execArgs, entry, "--help"], {
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? "/", NODE_COMPILE_CACHE: cacheDir },
      stdio: "ignore",
      signal,
    });
    // Only an optimisation: a failure to run it (or an abort) costs the launchers their start-up time, nothing else.
    child.once("error", () => resolve());
    child.once("exit", () => resolve());
  });
}
