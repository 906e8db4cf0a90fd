import type { VirtualMachineInstance, VirtualMachineInstanceMigration } from "@kvt/api";
import type { InformerHandlers, KubeObject } from "@kvt/kube";
import { createMetricsRegistry } from "@kvt/observability";
import { describe, expect, it } from "vitest";
import { ControllerMetrics, type ObservedInformer } from "./controller-metrics.ts";

class FakeInformer<T extends KubeObject> implements ObservedInformer<T> {
  items: T[] = [];
  readonly handlers: InformerHandlers<T>[] = [];
  readonly store = { list: (): T[] => this.items };
  addHandlers(handlers: InformerHandlers<T>): void {
    this.handlers.push(handlers);
  }
  update(old: T, obj: T): void {
    this.items = this.items.filter((i) => i.metadata?.name !== obj.metadata?.name).concat(obj);
    for (const h of this.handlers) h.onUpdate?.(old, obj);
  }
}

const created = new Date(Date.now() - 3_000).toISOString();
const vmi = (name: string, phase: string, nodeName?: string): VirtualMachineInstance =>
  ({
    metadata: { name, namespace: "default", creationTimestamp: created },
    spec: { domain: { devices: {} } },
    status: { phase, ...(nodeName ? { nodeName } : {}) },
  }) as VirtualMachineInstance;
const vmim = (name: string, phase: string, failureReason?: string): VirtualMachineInstanceMigration =>
  ({
    metadata: { name, namespace: "default", creationTimestamp: created },
    spec: { vmiName: "vm1" },
    status: { phase, ...(failureReason ? { migrationState: { failureReason } } : {}) },
  }) as VirtualMachineInstanceMigration;

describe("ControllerMetrics", () => {
  it("counts VMIs by node and phase and migrations in flight, from the caches at scrape time", async () => {
    const registry = createMetricsRegistry({ defaultMetrics: false });
    const metrics = new ControllerMetrics(registry);
    const vmis = new FakeInformer<VirtualMachineInstance>();
    const migrations = new FakeInformer<VirtualMachineInstanceMigration>();
    metrics.watch({ vmis, migrations });
    vmis.items = [vmi("a", "Running", "node01"), vmi("b", "Running", "node01"), vmi("c", "Scheduling")];
    migrations.items = [vmim("m1", "Pending"), vmim("m2", "Scheduled"), vmim("m3", "Running"), vmim("m4", "Failed")];
    metrics.setLeading(true);
    metrics.setReady(true);
    const text = await registry.metrics();
    expect(text).toContain('kubevirt_vmi_phase_count{node="node01",phase="running"} 2');
    expect(text).toContain('kubevirt_vmi_phase_count{node="",phase="scheduling"} 1');
    expect(text).toContain("kubevirt_vmi_migrations_in_pending_phase 1");
    expect(text).toContain("kubevirt_vmi_migrations_in_scheduling_phase 1");
    expect(text).toContain("kubevirt_vmi_migrations_in_running_phase 1");
    expect(text).toContain("kubevirt_virt_controller_leading_status 1");
    expect(text).toContain("kubevirt_virt_controller_ready_status 1");
  });

  it("observes phase transitions from creation and counts migration outcomes with bounded reasons", async () => {
    const registry = createMetricsRegistry({ defaultMetrics: false });
    const metrics = new ControllerMetrics(registry);
    const vmis = new FakeInformer<VirtualMachineInstance>();
    const migrations = new FakeInformer<VirtualMachineInstanceMigration>();
    metrics.watch({ vmis, migrations });
    vmis.update(vmi("a", "Scheduled"), vmi("a", "Running", "node01"));
    vmis.update(vmi("a", "Running", "node01"), vmi("a", "Running", "node01"));
    migrations.update(vmim("m1", "Running"), vmim("m1", "Succeeded"));
    migrations.update(vmim("m2", "Running"), vmim("m2", "Failed", "target connection lost: ECONNRESET"));
    const text = await registry.metrics();
    expect(text).toContain('kubevirt_vmi_phase_transition_time_from_creation_seconds_count{phase="Running"} 1');
    expect(text).toContain('kubevirt_vmi_phase_transition_time_from_creation_seconds_bucket{le="5",phase="Running"} 1');
    expect(text).toContain(
      'kubevirt_vmi_migration_phase_transition_time_from_creation_seconds_count{phase="Failed"} 1',
    );
    expect(text).toContain('kubevirt_vmi_migration_succeeded{namespace="default"} 1');
    expect(text).toContain('kubevirt_vmi_migration_failed{namespace="default",reason="ConnectionLost"} 1');
  });
});
