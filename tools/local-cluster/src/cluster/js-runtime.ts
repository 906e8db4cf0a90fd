/**
 * The JavaScript runtime the local cluster's processes run on: Node 24 (the default) or Deno 2, both from the
 * project's devDependencies. One choice reaches every process: the supervisor starts each component with it, and a
 * process-kubelet starts its launchers with the runtime it runs on itself (kubelet/main.ts).
 *
 *   runtime   command line of a TypeScript entry point
 *   -------   -------------------------------------------------------------------------------
 *   node      <node> [node and V8 flags] entry.ts args...
 *   deno      <deno> run -A [--v8-flags=<the V8 flags>] entry.ts args...   (Node-only flags dropped)
 */
import { basename, join } from "node:path";

/** Which runtime. */
export type RuntimeName = "node" | "deno";

/** An executable and the arguments it needs before an entry point. */
export interface JsRuntime {
  readonly name: RuntimeName;
  readonly execPath: string;
  readonly execArgs: readonly string[];
}

/**
 * What `deno run` needs for our processes: every permission (they open sockets, spawn QEMU, load the native addon,
 * read and write the data directory). No `--unstable-*` flag: node:sqlite, worker_threads, Node-API addons and
 * unix-socket HTTP are stable in Deno 2.
 */
export const DENO_RUN_ARGS: readonly string[] = ["run", "-A"];

/**
 * Flags that are V8's own (Node passes them through to V8; Deno takes them in `--v8-flags`). Other Node flags
 * (`--v8-pool-size`, `--enable-source-maps`, ...) have no Deno equivalent and are dropped for Deno.
 */
const V8_FLAGS = new Set(["--max-semi-space-size", "--max-old-space-size", "--stack-size", "--optimize-for-size"]);

/**
 * Node flags for the cluster's processes that mostly wait (every component but the API server, which allocates per
 * request): a 1 MiB young-generation semi-space (default 16 MiB), one V8 worker thread (default 4) and V8's
 * optimize-for-size mode. With MALLOC_ARENA_MAX=1, the footprint bench (demo VM running) went 1228 -> 1112 MiB of RSS.
 */
export const SMALL_PROCESS_NODE_FLAGS: readonly string[] = [
  "--max-semi-space-size=1",
  "--v8-pool-size=1",
  "--optimize-for-size",
];

/** Which runtime runs this process. */
export function currentRuntimeName(): RuntimeName {
  return "Deno" in globalThis ? "deno" : "node";
}

/** Which runtime an executable is, by its file name (`deno`, else Node). */
export function runtimeNameOf(execPath: string): RuntimeName {
  return basename(execPath).startsWith("deno") ? "deno" : "node";
}

/**
 * The runtime `name` as the project ships it: this process's executable when it is that runtime, else the one in
 * `projectRoot`'s node_modules/.bin (the devDependencies `node` and `deno`).
 */
export function jsRuntime(name: RuntimeName, projectRoot: string): JsRuntime {
  const execPath = currentRuntimeName() === name ? process.execPath : join(projectRoot, "node_modules/.bin", name);
  return { name, execPath, execArgs: name === "deno" ? DENO_RUN_ARGS : [] };
}

/** Node flags as `runtime` takes them: as they are for Node; for Deno, the V8 ones in one `--v8-flags`, others dropped. */
export function runtimeFlags(runtime: RuntimeName, nodeFlags: readonly string[]): string[] {
  if (runtime === "node") return [...nodeFlags];
  const v8 = nodeFlags.filter((f) => V8_FLAGS.has(f.split("=")[0]));
  return v8.length > 0 ? [`--v8-flags=${v8.join(",")}`] : [];
}
