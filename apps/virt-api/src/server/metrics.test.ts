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
    const text = await registry.metrics();
    expect(text).toContain('kubevirt_console_active_connections{namespace="default"} 1');
    expect(text).toContain("kubevirt_virt_api_ready_status 1");
    expect(text).toContain('kubevirt_virt_api_requests_total{handler="vm/migrate",code="202"} 1');
    expect(text).not.toContain('name="vm1"');
  });
});
