import { kubeConfigFor, RestClient } from "@kvt/kube";
import { catalogMismatches } from "@kvt/monitoring";
import { createMetricsRegistry } from "@kvt/observability";
import { describe, expect, it } from "vitest";
import { virtApiMetrics } from "./metrics.ts";

describe("virtApiMetrics", () => {
  it("counts open console sessions per namespace under KubeVirt's metric name, and requests by handler", async () => {
    const registry = createMetricsRegistry({ defaultMetrics: false });
    const m = virtApiMetrics(registry);
    m.setReady(true);
    m.opened("default", "vm1");
    m.opened("default", "vm2");
    m.closed("default", "vm1");
    m.handled("vm/migrate", 202);
    m.portForwardTunnels.opened("default", "vm1");
    const text = await registry.metrics();
    expect(text).toContain('kubevirt_console_active_connections{namespace="default"} 1');
    expect(text).toContain('kubevirt_portforward_active_tunnels{namespace="default"} 1');
    expect(text).toContain("kubevirt_virt_api_ready_status 1");
    expect(text).toContain('kubevirt_virt_api_requests_total{handler="vm/migrate",code="202"} 1');
    expect(text).not.toContain('name="vm1"');
  });

  it("serves every catalog metric of virt-api with its type and labels", async () => {
    const registry = createMetricsRegistry();
    const metrics = virtApiMetrics(registry);
    metrics.handled("vm/migrate", 202);
    metrics.portForwardTunnels.opened("default", "vm1");
    // The API client's metrics, as main.ts wires them (nothing listens on port 1: the request fails, and counts).
    const transport = new RestClient(kubeConfigFor("http://127.0.0.1:1", "t"), { registry });
    await transport
      .request({ method: "GET", path: "/apis/kubevirt.io/v1/namespaces/default/virtualmachines/vm1" })
      .catch(() => {});
    const text = await registry.metrics();
    expect(catalogMismatches("virt-api", text)).toEqual([]);
    expect(text).toContain(
      'kubevirt_rest_client_request_latency_seconds_count{verb="GET",url="/apis/kubevirt.io/v1/namespaces/{namespace}/virtualmachines/{name}"} 1',
    );
  });
});
