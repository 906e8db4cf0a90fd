import { ANNOTATION, type VirtualMachineInstance } from "@kvt/api";
import { setupTracing } from "@kvt/observability";
import { trace } from "@opentelemetry/api";
import { beforeAll, describe, expect, it } from "vitest";
import { reconcileParent } from "./migration-trace.ts";

const MIGRATION = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
const CREATION = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

const vmi = (phase: string, endTimestamp?: string): VirtualMachineInstance =>
  ({
    metadata: {
      name: "vm1",
      annotations: { [ANNOTATION.migrationTraceparent]: MIGRATION, [ANNOTATION.traceparent]: CREATION },
    },
    spec: { domain: { devices: {} } },
    status: { phase, migrationState: { migrationUid: "m1", ...(endTimestamp ? { endTimestamp } : {}) } },
  }) as VirtualMachineInstance;

const traceIdOf = (v: VirtualMachineInstance, now?: number) => {
  const ctx = reconcileParent(v, now);
  return ctx ? trace.getSpanContext(ctx)?.traceId : undefined;
};

describe("reconcileParent", () => {
  beforeAll(() => {
    setupTracing({ serviceName: "test", env: {} });
  });

  it("joins the migration's trace while it runs and shortly after it ended", () => {
    expect(traceIdOf(vmi("Running"))).toBe("0af7651916cd43dd8448eb211c80319c");
    const ended = "2026-01-01T00:00:00Z";
    expect(traceIdOf(vmi("Running", ended), Date.parse(ended) + 5_000)).toBe("0af7651916cd43dd8448eb211c80319c");
    expect(traceIdOf(vmi("Running", ended), Date.parse(ended) + 60_000)).toBeUndefined();
  });

  it("joins the creation trace only while the VMI starts", () => {
    const starting = vmi("Scheduled");
    delete (starting.status as { migrationState?: unknown }).migrationState;
    expect(traceIdOf(starting)).toBe("4bf92f3577b34da6a3ce929d0e0e4736");
  });
});
