#!/usr/bin/env node
/** process-kubelet: one simulated node of the local cluster (see kubelet.ts). */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { createLogger } from "@kvt/observability";
import { main } from "@kvt/runtime";
import { startNodeAgent } from "./node-agent.ts";

const projectRoot = new URL("../../../../", import.meta.url).pathname;

await main({
  name: "process-kubelet",
  version: "0.1.0",
  summary: "Runs the Pods bound to one node of the local cluster as local processes.",
  usage: "--node-name NAME --kubeconfig FILE --data-dir DIR",
  flags: { "node-name": { type: "string" }, kubeconfig: { type: "string" }, "data-dir": { type: "string" } },
  async run({ values }, signal) {
    const nodeName = values["node-name"];
    const kubeconfig = values.kubeconfig;
    const dataDir = values["data-dir"];
    if (!nodeName || !kubeconfig || !dataDir) {
      process.stderr.write("process-kubelet: --node-name, --kubeconfig and --data-dir are required\n");
      return 2;
    }
    mkdirSync(join(dataDir, "sockets"), { recursive: true });
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(kubeconfig);
    const log = createLogger({ component: "process-kubelet" }).child({ node: nodeName });
    const agent = await startNodeAgent({
      nodeName,
      kubeConfig,
      dataDir,
      layout: {
        projectRoot,
        execPath: process.execPath,
        execArgs: "Deno" in globalThis ? ["run", "-A"] : [],
        socketDir: join(dataDir, "sockets"),
      },
      log,
    });
    await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
    log.info("stopping: node shutdown, stopping every pod");
    await agent.stop();
    return 0;
  },
});
