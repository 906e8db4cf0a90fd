import { createMetricsRegistry } from "@kvt/observability";
import { describe, expect, it } from "vitest";
import { virtApiMetrics } from "./metrics.ts";

describe("virtApiMetrics", () => {
  it("counts open console sessions per VMI under KubeVirt's metric name", async () => {
    const registry = createMetricsRegistry({ defaultMetrics: false });
    const m = virtApiMetrics(registry);
    m.setReady(true);
    m.opened("default", "vm1");
    m.opened("default", "vm1");
    m.closed("default", "vm1");
    const text = await registry.metrics();
    expect(text).toContain('kubevirt_console_active_connections{namespace="default",name="vm1"} 1');
    expect(text).toContain("kubevirt_virt_api_ready_status 1");
    expect(text).toMatch(/kubevirt_vmi_last_api_connection_timestamp_seconds\{namespace="default",name="vm1"\} \d+/);
  });
});
