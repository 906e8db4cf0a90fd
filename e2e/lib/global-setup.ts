/**
 * vitest globalSetup for e2e: starts one local cluster for the whole run and stops it afterwards. Tests read its
 * kubeconfig with `inject("kubeconfig")`. KVT_E2E_TRACES=<file> records every component's spans there.
 */
import type { TestProject } from "vitest/node";
import { startE2eCluster } from "./cluster.ts";

declare module "vitest" {
  export interface ProvidedContext {
    kubeconfig: string;
    nodeNames: string[];
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const { cluster, cleanup } = await startE2eCluster(process.env.KVT_E2E_TRACES);
  process.env.KVT_E2E_KUBECONFIG = cluster.kubeconfig;
  project.provide("kubeconfig", cluster.kubeconfig);
  project.provide("nodeNames", [...cluster.nodeNames]);
  return cleanup;
}
