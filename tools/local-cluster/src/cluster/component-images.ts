/**
 * The local cluster's component "images": every long-running component's module graph (the API server, the
 * scheduler, the process-kubelet, the service proxy, virt-api, virt-controller, virt-handler) bundled into ES modules
 * once per cluster start, from the sources as they are then, as a real cluster runs pre-built images. One build, so
 * the modules the components share land in shared chunks; about a second of bundling for all of them.
 *
 * Why: a process that runs TypeScript sources keeps Node's type stripper resident (~17 MiB each) and resolves
 * hundreds of modules one by one; and the project's modules import Node built-ins through `require` in a bundle,
 * which keeps the lazily loaded parts of built-ins (undici behind `http.WebSocket`, ...) out of processes that never
 * use them (launcher-image.ts). The API server's worker threads are bundled too ({@link WORKER_ENTRIES}); anything
 * else a component loads by path still comes from the sources.
 */
import { execFile } from "node:child_process";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";

const execFileAsync = promisify(execFile);

/** Source entry points (relative to the project root) of the components that run from a bundle, by bundle name. */
export const COMPONENT_ENTRIES: Readonly<Record<string, string>> = {
  apiserver: "tools/local-cluster/src/apiserver/main.ts",
  scheduler: "tools/local-cluster/src/scheduler/main.ts",
  kubelet: "tools/local-cluster/src/kubelet/main.ts",
  "service-proxy": "tools/local-cluster/src/proxy/main.ts",
  "virt-api": "apps/virt-api/src/main.ts",
  "virt-controller": "apps/virt-controller/src/main.ts",
  "virt-handler": "apps/virt-handler/src/main.ts",
};

/** Worker threads' entries (relative to the project root) bundled with the components, by bundle name. */
export const WORKER_ENTRIES: Readonly<Record<string, string>> = {
  "apiserver-log-worker": "tools/local-cluster/src/apiserver/storage/log-worker.ts",
  "apiserver-checkpoint-worker": "tools/local-cluster/src/apiserver/storage/checkpoint-worker.ts",
};

/**
 * Whether a command line (`argv`) runs the component whose source entry is `entry` (relative to the project root,
 * as in {@link COMPONENT_ENTRIES}): from its sources, or from its bundle `<name>.mjs` in a cluster's component-images
 * directory. For tests and tools that find a cluster's processes.
 */
export function runsComponent(argv: readonly string[], entry: string): boolean {
  const name = Object.entries(COMPONENT_ENTRIES).find(([, rel]) => rel === entry)?.[0];
  return argv.some((a) => a.endsWith(entry) || (name !== undefined && a.endsWith(`/component-images/${name}.mjs`)));
}

/**
 * Bundles every component into `outDir` (emptied first) with `execPath` (a Node; the bundler runs in a child process
 * so its ~570 MiB leave with it). Returns source entry (relative to `projectRoot`) -> bundled entry module. Rejects
 * when the bundler is missing or a build fails; the caller then runs the sources.
 */
export async function buildComponentImages(
  projectRoot: string,
  outDir: string,
  execPath = process.execPath,
): Promise<Record<string, string>> {
  rmSync(outDir, { recursive: true, force: true });
  const cli = new URL("../kubelet/bundle-cli.ts", import.meta.url).pathname;
  const pairs = Object.entries(COMPONENT_ENTRIES).map(([name, rel]) => `${name}=${join(projectRoot, rel)}`);
  for (const [name, rel] of Object.entries(WORKER_ENTRIES)) pairs.push("--worker", `${name}=${join(projectRoot, rel)}`);
  try {
    const { stdout } = await execFileAsync(execPath, [cli, "--many", outDir, ...pairs], { maxBuffer: 1 << 20 });
    const built = JSON.parse(stdout) as Record<string, string>;
    return Object.fromEntries(Object.entries(COMPONENT_ENTRIES).map(([name, rel]) => [rel, built[name]]));
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr?.trim();
    throw new Error(`Cannot bundle the cluster's components${stderr ? `: ${stderr}` : ""}`, { cause: error });
  }
}
