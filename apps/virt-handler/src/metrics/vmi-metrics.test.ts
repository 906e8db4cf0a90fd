import type { DomainInfo } from "@kvt/launcher-rpc";
import { createMetricsRegistry } from "@kvt/observability";
import { describe, expect, it } from "vitest";
import { registerVmiMetrics } from "./vmi-metrics.ts";

const report = (progress: boolean): DomainInfo => ({
  protocolVersion: "v1",
  vmi: { namespace: "default", name: "vm1", uid: "u" },
  pod: {},
  pid: 1,
  state: "Running",
  migration: {
    migrationUid: "m",
    role: "source",
    phase: progress ? "Running" : "Succeeded",
    ...(progress
      ? {
          progress: {
            iteration: 2,
            processedBytes: 1000,
            remainingBytes: 24,
            dirtyRateBytesPerSec: 5,
            transferRateBytesPerSec: 7,
            expectedDowntimeMs: 1,
            throttle: 0,
          },
        }
      : { result: { ok: true, downtimeMs: 4, totalSeconds: 1, bytesSent: 1, iterations: 1 } }),
  },
});

describe("per-VMI migration metrics", () => {
  it("export the source's progress and the last downtime under KubeVirt's names and labels", async () => {
    const registry = createMetricsRegistry({ defaultMetrics: false });
    let reports = [report(true)];
    registerVmiMetrics(registry, { nodeName: "node01", reports: () => reports });
    const text = await registry.metrics();
    expect(text).toContain(
      'kubevirt_vmi_migration_data_processed_bytes{namespace="default",name="vm1",node="node01"} 1000',
    );
    expect(text).toContain(
      'kubevirt_vmi_migration_data_remaining_bytes{namespace="default",name="vm1",node="node01"} 24',
    );
    reports = [report(false)];
    const after = await registry.metrics();
    expect(after).toContain(
      'kubevirt_vmi_migration_last_downtime_seconds{namespace="default",name="vm1",node="node01"} 0.004',
    );
    expect(after).not.toContain("kubevirt_vmi_migration_data_processed_bytes{");
  });
});
