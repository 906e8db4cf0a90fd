/**
 * The flags deploy/'s workloads pass exist: each component's `--help` (its main.ts, run by this Node) names every
 * flag its container's args use, so renaming a flag in an app fails here rather than in a crash-looping pod.
 */
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { allObjects } from "./manifests.ts";
import { COMPONENTS, type Component } from "./objects.ts";

function argsOf(component: Component): string[] {
  const w = allObjects().find(
    (o) => o.metadata.name === component && (o.kind === "Deployment" || o.kind === "DaemonSet"),
  ) as { spec: { template: { spec: { containers: { args?: string[] }[] } } } } | undefined;
  return w?.spec.template.spec.containers[0]?.args ?? [];
}

describe("workload flags", () => {
  it.each(COMPONENTS)("%s: every flag in the container args is one its --help documents", (component) => {
    const main = fileURLToPath(new URL(`../../../apps/${component}/src/main.ts`, import.meta.url));
    const help = execFileSync(process.execPath, [main, "--help"], { encoding: "utf8", timeout: 60_000 });
    const flags = argsOf(component).map((a) => a.split("=")[0] ?? a);
    expect(flags.length).toBeGreaterThan(0);
    const missing = flags.filter((f) => !new RegExp(`${f}(?![-a-z])`).test(help));
    expect(missing).toEqual([]);
  });
});
