#!/usr/bin/env node
/** The local cluster's scheduler process (see scheduler.ts). */
import { parseQuantity } from "@kvt/api";
import { kubeConfigFromFile, RestClient } from "@kvt/kube";
import { createLogger } from "@kvt/observability";
import { main } from "@kvt/runtime";
import { Scheduler } from "./scheduler.ts";

await main({
  name: "local-scheduler",
  version: "0.1.0",
  summary: "Binds pending Pods of the local cluster to nodes (kube-scheduler's filters, least-loaded node).",
  usage: "--kubeconfig FILE",
  flags: { kubeconfig: { type: "string" } },
  async run({ values }, signal) {
    if (!values.kubeconfig) {
      process.stderr.write("local-scheduler: --kubeconfig is required\n");
      return 2;
    }
    const transport = new RestClient(kubeConfigFromFile(values.kubeconfig), { userAgent: "local-scheduler" });
    const log = createLogger({ component: "local-scheduler" });
    const scheduler = new Scheduler({
      transport,
      parseQuantity: (q) => Number(parseQuantity(q).milliValue()) / 1000,
      log,
    });
    await scheduler.start();
    log.info("scheduler started");
    await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
    await scheduler.stop();
    return 0;
  },
});
