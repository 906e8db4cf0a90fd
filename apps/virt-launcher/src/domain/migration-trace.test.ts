import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { MigrationProgress } from "@kvt/launcher-rpc";
import { type OtlpTraceRequest, setupTracing } from "@kvt/observability";
import { context, trace } from "@opentelemetry/api";
import { describe, expect, it } from "vitest";
import { SourceMigrationTrace, TargetMigrationTrace } from "./migration-trace.ts";

const progress = (iteration: number, processedBytes: number): MigrationProgress => ({
  iteration,
  processedBytes,
  remainingBytes: 1000 - processedBytes,
  dirtyRateBytesPerSec: 10,
  transferRateBytesPerSec: 100,
  expectedDowntimeMs: 5,
  throttle: 0,
});

describe("migration spans of a launcher", () => {
  it("turn progress events and the result into handshake, bulk pass, iterations and a switch-over with its downtime", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kvt-launcher-trace-"));
    const file = join(dir, "traces.jsonl");
    const handle = setupTracing({ serviceName: "virt-launcher", env: { KUBEVIRT_TRACES_FILE: file } });
    try {
      const source = new SourceMigrationTrace("m1", "10.0.0.2");
      source.progress(progress(1, 100));
      source.progress(progress(1, 800));
      source.progress(progress(2, 900));
      source.progress(progress(3, 950));
      source.end({ ok: true, downtimeMs: 12.5, totalSeconds: 1, bytesSent: 1000, iterations: 3 });
      const target = new TargetMigrationTrace("m1");
      target.completed();
      await handle.shutdown();
      const spans = readFileSync(file, "utf8")
        .trim()
        .split("\n")
        .flatMap((l) => (JSON.parse(l) as OtlpTraceRequest).resourceSpans)
        .flatMap((r) => r.scopeSpans.flatMap((s) => s.spans));
      const byName = (n: string) => spans.filter((s) => s.name === n);
      const attr = (s: (typeof spans)[number], key: string): number | string | undefined => {
        const v = s.attributes.find((a) => a.key === key)?.value;
        if (!v) return undefined;
        if ("intValue" in v) return Number(v.intValue);
        if ("doubleValue" in v) return v.doubleValue;
        return "stringValue" in v ? v.stringValue : undefined;
      };
      expect(spans.map((s) => s.name).sort()).toEqual([
        "handshake",
        "migrate VirtualMachineInstance",
        "receive VirtualMachineInstance",
        "resume VirtualMachineInstance",
        "send memory bulk pass",
        "send memory iteration",
        "send memory iteration",
        "switch over",
      ]);
      const root = byName("migrate VirtualMachineInstance")[0];
      for (const s of [...byName("send memory iteration"), ...byName("switch over"), ...byName("handshake")]) {
        expect(s.parentSpanId).toBe(root.spanId);
      }
      expect(attr(byName("send memory bulk pass")[0], "migration.bytes")).toBe(800);
      expect(byName("send memory iteration").map((s) => attr(s, "migration.bytes"))).toEqual([100, 50]);
      expect(attr(byName("switch over")[0], "migration.downtime_ms")).toBe(12.5);
      expect(attr(root, "migration.downtime_ms")).toBe(12.5);
      expect(byName("resume VirtualMachineInstance")[0].parentSpanId).toBe(
        byName("receive VirtualMachineInstance")[0].spanId,
      );
    } finally {
      await handle.shutdown();
      trace.disable();
      context.disable();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
