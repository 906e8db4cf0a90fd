/**
 * virt-controller serves every metric the catalog (@kvt/monitoring) assigns to it, with the catalog's types and
 * labels: the controllers run against the real local API server and /metrics is scraped over HTTP.
 */
import type { VirtualMachine } from "@kvt/api";
import { KUBEVIRT_V1, kubeConfigFor, RestClient, resourceClient } from "@kvt/kube";
import { type ApiServerHandle, startApiServer } from "@kvt/local-cluster";
import { catalogMismatches } from "@kvt/monitoring";
import { createMetricsRegistry, type MetricsServer, startMetricsServer } from "@kvt/observability";
import { installKubeVirtCrds, newVm, withRunning } from "@kvt/testing";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { VirtControllerApp } from "../app.ts";
import { ControllerMetrics } from "./controller-metrics.ts";

describe("virt-controller /metrics against the catalog", () => {
  let server: ApiServerHandle;
  let app: VirtControllerApp;
  let health: MetricsServer;

  beforeAll(async () => {
    server = await startApiServer({ inMemory: true, port: 0, logger: pino({ level: "silent" }) });
    const registry = createMetricsRegistry();
    const transport = new RestClient(kubeConfigFor(server.url, server.token), { registry });
    await installKubeVirtCrds(transport);
    const metrics = new ControllerMetrics(registry);
    metrics.setReady(true);
    metrics.setLeading(true);
    app = new VirtControllerApp({ transport, logger: pino({ level: "silent" }), registry, metrics });
    health = await startMetricsServer({ registry, port: 0, beforeScrape: () => app.updateMetrics() });
    await app.start();
    await resourceClient<VirtualMachine>(transport, KUBEVIRT_V1.virtualMachines).create(
      newVm("vm1", withRunning(true)),
    );
  }, 60_000);

  afterAll(async () => {
    await app?.stop();
    await health?.close();
    await server?.stop();
  }, 120_000); // a loaded CI machine took over the default 10 s to stop the three, and once over 30 s (load 13-16)

  it("exports every catalog metric of virt-controller with its type and labels", async () => {
    let problems: string[] = [];
    for (let attempt = 0; attempt < 100; attempt++) {
      const text = await (await fetch(`http://127.0.0.1:${health.port}/metrics`)).text();
      problems = catalogMismatches("virt-controller", text);
      // The VMI phase series appear once the VM controller has created the VMI.
      if (problems.length === 0 && text.includes("kubevirt_vmi_phase_count{")) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(problems).toEqual([]);
  });
});
