#!/usr/bin/env node
/** The local cluster's service proxy process (kube-proxy's job; see service-proxy.ts). */
import { kubeConfigFromFile, RestClient } from "@kvt/kube";
import { createLogger } from "@kvt/observability";
import { main } from "@kvt/runtime";
import { proxyNetworkOf, readPodNetworkFile } from "../network/cluster-network.ts";
import type { ProxyNetwork } from "./nft-ruleset.ts";
import { ServiceProxy } from "./service-proxy.ts";

await main({
  name: "local-service-proxy",
  version: "0.1.0",
  summary: "Routes the local cluster's ClusterIP Services to their endpoints with nftables (kube-proxy's job).",
  usage: "--kubeconfig FILE --pod-network FILE",
  flags: { kubeconfig: { type: "string" }, "pod-network": { type: "string" } },
  details: ["  --pod-network FILE   the cluster's pod network plan (bridge, pod and service CIDRs)"],
  async run({ values }, signal) {
    if (!values.kubeconfig || !values["pod-network"]) {
      process.stderr.write("local-service-proxy: --kubeconfig and --pod-network are required\n");
      return 2;
    }
    let network: ProxyNetwork | undefined;
    try {
      network = proxyNetworkOf(readPodNetworkFile(values["pod-network"]));
    } catch (err) {
      process.stderr.write(`local-service-proxy: cannot read ${values["pod-network"]}: ${(err as Error).message}\n`);
      return 2;
    }
    if (!network) {
      process.stderr.write(`local-service-proxy: ${values["pod-network"]} has no serviceCidr\n`);
      return 2;
    }
    const transport = new RestClient(kubeConfigFromFile(values.kubeconfig), { userAgent: "local-service-proxy" });
    const log = createLogger({ component: "local-service-proxy" });
    const proxy = new ServiceProxy({ transport, network, log });
    await proxy.start();
    log.info({ table: network.table, serviceCidr: network.serviceCidr }, "service proxy started");
    await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
    await proxy.stop();
    return 0;
  },
});
