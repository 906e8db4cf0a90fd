#!/usr/bin/env node
/** process-kubelet: one simulated node of the local cluster (see kubelet.ts). */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { kubeConfigFromFile, RestClient } from "@kvt/kube";
import { createLogger } from "@kvt/observability";
import { main } from "@kvt/runtime";
import { currentRuntimeName, jsRuntime, runtimeFlags } from "../cluster/js-runtime.ts";
import { KubeletNetwork } from "../network/kubelet-network.ts";
import { warmLauncherCompileCache } from "./compile-cache.ts";
import { NODE_LAUNCHER_FLAGS, type RuntimeLayout } from "./container-spec.ts";
import { buildLauncherImage } from "./launcher-image.ts";
import { startNodeAgent } from "./node-agent.ts";

const projectRoot = new URL("../../../../", import.meta.url).pathname;

await main({
  name: "process-kubelet",
  version: "0.1.0",
  summary: "Runs the Pods bound to one node of the local cluster as local processes.",
  usage:
    "--node-name NAME --kubeconfig FILE --data-dir DIR --tls-cert-file FILE --tls-private-key-file FILE --client-ca-file FILE [--cpus N] [--pod-network FILE]",
  flags: {
    "node-name": { type: "string" },
    kubeconfig: { type: "string" },
    "data-dir": { type: "string" },
    cpus: { type: "string" },
    // The cluster's pod network plan (network/cluster-network.ts); without it pods share the node's network.
    "pod-network": { type: "string" },
    "tls-cert-file": { type: "string" },
    "tls-private-key-file": { type: "string" },
    "client-ca-file": { type: "string" },
    // The kubelet's --root-dir/device-plugins: its kubelet.sock and the device plugins' sockets.
    "device-plugins-dir": { type: "string" },
  },
  details: [
    "  --tls-cert-file FILE, --tls-private-key-file FILE   the log port's serving certificate (PEM), as the kubelet's",
    "  --client-ca-file FILE   CA of the only accepted clients (the API server's kubelet client certificate)",
    "  --device-plugins-dir DIR   where kubelet.sock serves device plugin registration (default DATA-DIR/device-plugins)",
  ],
  async run({ values }, signal) {
    const nodeName = values["node-name"];
    const kubeconfig = values.kubeconfig;
    const dataDir = values["data-dir"];
    if (!nodeName || !kubeconfig || !dataDir) {
      process.stderr.write("process-kubelet: --node-name, --kubeconfig and --data-dir are required\n");
      return 2;
    }
    const [certFile, keyFile, caFile] = [
      values["tls-cert-file"],
      values["tls-private-key-file"],
      values["client-ca-file"],
    ];
    if (!certFile || !keyFile || !caFile) {
      // The log port streams guest consoles: it never serves without TLS and client certificates.
      process.stderr.write(
        "process-kubelet: --tls-cert-file, --tls-private-key-file and --client-ca-file are required\n",
      );
      return 2;
    }
    const tls = {
      cert: readFileSync(certFile, "utf8"),
      key: readFileSync(keyFile, "utf8"),
      clientCa: readFileSync(caFile, "utf8"),
    };
    const transport = new RestClient(kubeConfigFromFile(kubeconfig), { userAgent: `process-kubelet/${nodeName}` });
    const log = createLogger({ component: "process-kubelet" }).child({ node: nodeName });
    // Launchers run on the runtime this kubelet runs on (`npm start -- --runtime deno` reaches them this way).
    const runtime = jsRuntime(currentRuntimeName(), projectRoot);
    const deno = runtime.name === "deno";
    const layout: { -readonly [K in keyof RuntimeLayout]: RuntimeLayout[K] } = {
      projectRoot,
      execPath: runtime.execPath,
      execArgs: [...runtime.execArgs, ...runtimeFlags(runtime.name, NODE_LAUNCHER_FLAGS)],
      ...(deno ? {} : { compileCacheDir: join(dataDir, "compile-cache") }),
    };
    // The launcher image (a bundle of its sources: half the start-up CPU of each launcher), built in the background
    // so the node registers at once; pods started before it is ready run the sources. Then the compile cache is
    // warmed for whichever entry point launchers will run.
    const warm = (
      deno
        ? Promise.resolve()
        : buildLauncherImage(projectRoot, join(dataDir, "launcher-image")).then(
            (entry) => {
              layout.launcherEntry = entry;
            },
            (err: unknown) =>
              log.warn({ err }, "cannot bundle virt-launcher; launchers run from its TypeScript sources"),
          )
    ).then(() => warmLauncherCompileCache(layout, signal));
    // The CPUs the node advertises (default the machine's): the scheduler fits pods' CPU requests against them.
    const nodeCpus = values.cpus ? Number(values.cpus) : undefined;
    const podNetwork = values["pod-network"];
    const network = podNetwork ? KubeletNetwork.fromFile(podNetwork, nodeName) : undefined;
    const agent = await startNodeAgent({
      nodeName,
      transport,
      dataDir,
      layout,
      log,
      cpus: nodeCpus,
      network,
      tls,
      devicePluginsDir: values["device-plugins-dir"] ?? join(dataDir, "device-plugins"),
    });
    await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
    log.info("stopping: node shutdown, stopping every pod");
    await agent.stop();
    await warm;
    return 0;
  },
});
