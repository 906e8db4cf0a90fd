/**
 * vitest globalSetup for e2e: starts one local cluster for the whole run and stops it afterwards. Tests read its
 * kubeconfig with `inject("kubeconfig")`. Every component's spans are recorded to `inject("tracesFile")`
 * (KVT_E2E_TRACES=<file>, else a temporary file); `inject("scrapeConfig")` is the cluster's Prometheus scrape config.
 * The API server records its authorization audit to e2e/.reports/authz-audit.jsonl (KVT_E2E_AUTHZ_AUDIT=<file>),
 * from which `npm test` proves every rule of the components' roles needed (tools/scripts/src/rbac-usage.ts).
 *
 * KVT_E2E_CLUSTER=kube runs the same files against a real Kubernetes instead (tools/kube, the release installed from
 * deploy/: lib/kube-cluster.ts). `inject("clusterKind")` says which; files that need the local cluster's internals
 * (its processes, node directories, trace file, scrape config) are left out there (the list in lib/cluster-kind.ts, which vitest.config.ts leaves out).
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { TestProject } from "vitest/node";
import { startE2eCluster } from "./cluster.ts";
import { type ClusterKind, clusterKindFromEnv } from "./cluster-kind.ts";
import { startKubeE2eCluster } from "./kube-cluster.ts";

declare module "vitest" {
  export interface ProvidedContext {
    kubeconfig: string;
    nodeNames: string[];
    /** OTLP/JSON lines of every component's spans. */
    tracesFile: string;
    /** The Prometheus scrape configuration `npm start` writes for the cluster ("" on a real cluster). */
    scrapeConfig: string;
    /** The cluster the run was given: our local cluster, or a real Kubernetes (KVT_E2E_CLUSTER=kube). */
    clusterKind: ClusterKind;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  if (clusterKindFromEnv() === "kube") return await setupKube(project);
  const tracesDir = process.env.KVT_E2E_TRACES ? undefined : mkdtempSync(join(tmpdir(), "kvt-e2e-traces-"));
  const tracesFile = process.env.KVT_E2E_TRACES ?? join(tracesDir ?? "", "traces.jsonl");
  const audit =
    process.env.KVT_E2E_AUTHZ_AUDIT ?? fileURLToPath(new URL("../.reports/authz-audit.jsonl", import.meta.url));
  mkdirSync(dirname(audit), { recursive: true });
  rmSync(audit, { force: true }); // the API server appends; this run's decisions only
  const { cluster, cleanup } = await startE2eCluster(tracesFile, audit);
  process.env.KVT_E2E_KUBECONFIG = cluster.kubeconfig;
  project.provide("kubeconfig", cluster.kubeconfig);
  project.provide("nodeNames", [...cluster.nodeNames]);
  project.provide("tracesFile", tracesFile);
  project.provide("scrapeConfig", cluster.scrapeConfigPath);
  project.provide("clusterKind", "local");
  return async () => {
    await cleanup();
    // The temporary trace file goes with the cluster (KVT_E2E_KEEP keeps both).
    if (tracesDir && !process.env.KVT_E2E_KEEP) rmSync(tracesDir, { recursive: true, force: true });
  };
}

/** The run on a real Kubernetes: no trace file or scrape config (the files that read them skip themselves). */
async function setupKube(project: TestProject): Promise<() => Promise<void>> {
  const cluster = await startKubeE2eCluster();
  process.env.KVT_E2E_KUBECONFIG = cluster.kubeconfig;
  project.provide("kubeconfig", cluster.kubeconfig);
  project.provide("nodeNames", [...cluster.nodeNames]);
  project.provide("tracesFile", "");
  project.provide("scrapeConfig", "");
  project.provide("clusterKind", "kube");
  return cluster.stop;
}
