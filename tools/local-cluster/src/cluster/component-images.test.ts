import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildComponentImages, COMPONENT_ENTRIES, WORKER_ENTRIES } from "./component-images.ts";
import { componentTlsFiles } from "./component-volumes.ts";
import { type ClusterLayout, clusterComponents, nodeNames } from "./components.ts";

const projectRoot = new URL("../../../../", import.meta.url).pathname;
let dir = "";
let built: Record<string, string> = {};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "kvt-cimg-"));
  built = await buildComponentImages(projectRoot, join(dir, "images"));
}, 120_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the components' images", () => {
  // Two Node starts per component, the source's through the type stripper: 30 s was too little on a loaded 2-core CI
  // machine (CI 2026-11-27, load 13-16).
  it("bundles every component, and each bundle answers --help as its sources do, without the type stripper", () => {
    // The probe lists the built-in modules a run loaded: amaro is Node's TypeScript stripper, loaded by a .ts module.
    const probe = join(dir, "probe.cjs");
    writeFileSync(
      probe,
      "process.on('exit', () => process.stderr.write('PROBE ' + JSON.stringify(process.moduleLoadList) + '\\n'));",
    );
    expect(Object.keys(built).sort()).toEqual(Object.values(COMPONENT_ENTRIES).sort());
    for (const [source, bundle] of Object.entries(built)) {
      const fromBundle = spawnSync(process.execPath, ["--require", probe, bundle, "--help"], { encoding: "utf8" });
      const fromSource = spawnSync(process.execPath, [join(projectRoot, source), "--help"], { encoding: "utf8" });
      expect(fromBundle.status, `${bundle}: ${fromBundle.stderr}`).toBe(0);
      expect(fromBundle.stdout).toBe(fromSource.stdout);
      const loaded = JSON.parse(/^PROBE (.*)$/m.exec(fromBundle.stderr)?.[1] ?? "[]") as string[];
      expect(
        loaded.filter((m) => m.includes("amaro")),
        bundle,
      ).toEqual([]);
    }
  }, 120_000);

  it("bundles the API server's worker threads and points the API server at them, not at their sources", () => {
    const code = readdirSync(join(dir, "images"))
      .filter((f) => f.endsWith(".js") || f.endsWith(".mjs"))
      .map((f) => readFileSync(join(dir, "images", f), "utf8"))
      .join("\n");
    for (const [name, rel] of Object.entries(WORKER_ENTRIES)) {
      expect(existsSync(join(dir, "images", `${name}.mjs`)), name).toBe(true);
      expect(code).toContain(pathToFileURL(join(dir, "images", `${name}.mjs`)).href);
      expect(code).not.toContain(`new URL("./${rel.split("/").pop()}"`);
    }
  });

  it("runs each component from its bundle when the layout has one", () => {
    const layout: ClusterLayout = {
      projectRoot,
      dataDir: "/data",
      kubeconfig: "/data/kubeconfig",
      execPath: "/node",
      execArgs: [],
      apiPort: 6443,
      nodeNames: nodeNames(1),
      metricsPorts: {},
      virtApiPort: 8443,
      handlerPorts: { node01: 8186 },
      componentTls: componentTlsFiles("/data"),
      podNetworkFile: "/data/pod-network.json",
      serviceCidr: "10.96.0.0/16",
      componentEntries: built,
    };
    const entries = clusterComponents(layout).map((c) => c.argv.find((a) => a.endsWith(".mjs") || a.endsWith(".ts")));
    expect(entries.sort()).toEqual(
      ["apiserver", "scheduler", "kubelet", "service-proxy", "virt-api", "virt-controller", "virt-handler"]
        .map((name) => join(dir, "images", `${name}.mjs`))
        .sort(),
    );
  });
});
