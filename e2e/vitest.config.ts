import { projectConfig } from "../tools/vitest-config/src/index.ts";
import { clusterKindFromEnv, KUBE_LANE_OPEN, LOCAL_CLUSTER_ONLY } from "./lib/cluster-kind.ts";

// KVT_E2E_CLUSTER=kube: the files that need the local cluster's internals, or have an open bug on real nodes, stay
// out, each with its reason.
const kind = clusterKindFromEnv();
const leftOut: Record<string, string> = kind === "local" ? {} : { ...LOCAL_CLUSTER_ONLY, ...KUBE_LANE_OPEN };
for (const file of Object.keys(leftOut)) process.stdout.write(`[e2e] skipped on ${kind}: ${file}: ${leftOut[file]}\n`);

// Each lane its own report (the kube lane's ends in -kube), so npm test's kube lane does not overwrite the local run's.
export default projectConfig(
  {
    include: ["**/*.e2e.test.ts"],
    exclude: ["node_modules/**", ...Object.keys(leftOut)],
    globalSetup: ["lib/global-setup.ts"],
    // One cluster serves every file; files run one after the other so they never fight over it.
    fileParallelism: false,
    testTimeout: 180_000,
    hookTimeout: 300_000,
  },
  kind === "kube" ? "-kube" : "",
);
