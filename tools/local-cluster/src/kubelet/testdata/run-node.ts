/**
 * Runs one process-kubelet node in its own process for the kubelet restart test (so the test can kill -9 it):
 * `run-node.ts KUBECONFIG DATA_DIR NODE_NAME LAUNCHER_ENTRY`. Prints "ready" once the node is up.
 */
import { kubeConfigFromFile, RestClient } from "@kvt/kube";
import { pino } from "pino";
import { currentRuntimeName, jsRuntime } from "../../cluster/js-runtime.ts";
import { startNodeAgent } from "../node-agent.ts";

const [kubeconfigPath, dataDir, nodeName, launcherEntry] = process.argv.slice(2);
const transport = new RestClient(kubeConfigFromFile(kubeconfigPath));
const runtime = jsRuntime(currentRuntimeName(), dataDir);
await startNodeAgent({
  nodeName,
  transport,
  dataDir,
  layout: {
    projectRoot: dataDir,
    execPath: runtime.execPath,
    execArgs: runtime.execArgs,
    launcherEntry,
  },
  log: pino({ level: "silent" }),
});
process.stdout.write("ready\n");
