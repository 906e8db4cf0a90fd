/**
 * vitest globalSetup for e2e: starts one local cluster for the whole run and stops it afterwards. Tests read its
 * kubeconfig with `inject("kubeconfig")`. Every component's spans are recorded to `inject("tracesFile")`
 * (KVT_E2E_TRACES=<file>, else a temporary file); `inject("scrapeConfig")` is the cluster's Prometheus scrape config.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { startE2eCluster } from "./cluster.ts";

declare module "vitest" {
  export interface ProvidedContext {
    kubeconfig: string;
    nodeNames: string[];
    /** OTLP/JSON lines of every component's spans. */
    tracesFile: string;
    /** The Prometheus scrape configuration `npm start` writes for the cluster. */
    scrapeConfig: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const tracesDir = process.env.KVT_E2E_TRACES ? undefined : mkdtempSync(join(tmpdir(), "kvt-e2e-traces-"));
  const tracesFile = process.env.KVT_E2E_TRACES ?? join(tracesDir ?? "", "traces.jsonl");
  const { cluster, cleanup } = await startE2eCluster(tracesFile);
  process.env.KVT_E2E_KUBECONFIG = cluster.kubeconfig;
  project.provide("kubeconfig", cluster.kubeconfig);
  project.provide("nodeNames", [...cluster.nodeNames]);
  project.provide("tracesFile", tracesFile);
  project.provide("scrapeConfig", cluster.scrapeConfigPath);
  return async () => {
    await cleanup();
    // The temporary trace file goes with the cluster (KVT_E2E_KEEP keeps both).
    if (tracesDir && !process.env.KVT_E2E_KEEP) rmSync(tracesDir, { recursive: true, force: true });
  };
}
