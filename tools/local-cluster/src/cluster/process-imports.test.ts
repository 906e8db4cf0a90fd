/**
 * The node-side processes of the local cluster reach the API server through @kvt/kube only: loading
 * @kubernetes/client-node costs a process about 80 MiB of resident memory, once per kubelet and for the scheduler.
 * Each main module runs with `--help` under a module hook that lists every module the process loaded: its whole
 * static import graph, so an import of client-node anywhere below it (even a side-effect or mixed type import that
 * type stripping keeps) fails here.
 */
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";

const src = new URL("../", import.meta.url).pathname;

/** Every module URL `main` loads when run with `--help`. */
function modulesLoadedBy(main: string): string[] {
  const hook = `data:text/javascript,${encodeURIComponent(
    'import { registerHooks } from "node:module"; const seen = [];' +
      "registerHooks({ load(url, ctx, next) { seen.push(url); return next(url, ctx); } });" +
      'process.on("exit", () => process.stderr.write(seen.join("\\n")));',
  )}`;
  const run = spawnSync(process.execPath, ["--import", hook, `${src}${main}`, "--help"], { encoding: "utf8" });
  expect(run.status).toBe(0);
  return run.stderr.split("\n");
}

describe("node-side processes load no @kubernetes/client-node", () => {
  it.each([
    ["the process-kubelet", "kubelet/main.ts", "/kubelet/kubelet.ts"],
    ["the scheduler", "scheduler/main.ts", "/scheduler/scheduler.ts"],
    ["the service proxy", "proxy/main.ts", "/proxy/service-proxy.ts"],
  ])(
    "%s (%s)",
    (_name, main, component) => {
      const loaded = modulesLoadedBy(main);
      // The hook saw the component and its API client: the check below looks at a real import graph.
      expect(loaded.some((url) => url.endsWith(component))).toBe(true);
      expect(loaded.some((url) => url.endsWith("/libs/kube/src/client/rest-client.ts"))).toBe(true);
      expect(loaded.filter((url) => url.includes("@kubernetes/client-node"))).toEqual([]);
    },
    60_000,
  );
});
