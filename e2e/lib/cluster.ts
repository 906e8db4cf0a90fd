/**
 * The e2e cluster: one local cluster for the whole e2e run (vitest globalSetup starts it and publishes its
 * kubeconfig in KVT_E2E_KUBECONFIG), exactly as `npm start` runs it, with its own data directory.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildDemoLinux, registerTestGuest } from "@kvt/images";
import { type LocalCluster, startLocalCluster } from "@kvt/local-cluster";
import { testGuestPath } from "@kvt/vmm";

const root = new URL("../../", import.meta.url).pathname;

/** The kubeconfig of the running e2e cluster (set by the global setup). */
export function e2eKubeconfig(): string {
  const kc = process.env.KVT_E2E_KUBECONFIG;
  if (!kc)
    throw new Error(
      "KVT_E2E_KUBECONFIG is not set: run e2e tests through e2e/vitest.config.ts (its globalSetup starts the cluster)",
    );
  return kc;
}

/** Starts a fresh cluster in a temporary data directory. */
export async function startE2eCluster(
  tracesFile?: string,
  authorizationAuditLog?: string,
): Promise<{ cluster: LocalCluster; cleanup: () => Promise<void> }> {
  await buildDemoLinux({ log: (line) => process.stdout.write(`[e2e images] ${line}\n`) });
  registerTestGuest(testGuestPath());
  const dataDir = mkdtempSync(join(tmpdir(), "kvt-e2e-cluster-"));
  const cluster = await startLocalCluster({
    projectRoot: root,
    dataDir,
    nodes: 2,
    tracesFile,
    authorizationAuditLog,
    progress: (m) => process.stdout.write(`[e2e cluster] ${m}\n`),
  });
  return {
    cluster,
    cleanup: async () => {
      await cluster.stop();
      if (!process.env.KVT_E2E_KEEP) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
