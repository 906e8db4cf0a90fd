import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, type Tracer, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { BatchSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FileSpanExporter } from "./file-span-exporter.ts";
import { FileTracerProvider } from "./file-tracer.ts";
import type { OtlpSpan, OtlpTraceRequest } from "./otlp-json.ts";
import { contextFromTraceparent } from "./tracing.ts";
import { W3CTraceparentPropagator } from "./w3c-propagator.ts";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "kvt-file-tracer-"));
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceparentPropagator());
});
afterEach(() => {
  context.disable();
  propagation.disable();
  rmSync(dir, { recursive: true, force: true });
});

function lines(file: string): OtlpTraceRequest[] {
  return readFileSync(file, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as OtlpTraceRequest);
}

const spansOf = (requests: OtlpTraceRequest[]): OtlpSpan[] =>
  requests.flatMap((r) => r.resourceSpans.flatMap((rs) => rs.scopeSpans.flatMap((s) => s.spans)));

/** The spans of a migration-like scenario, as a tracer records them. */
function scenario(tracer: Tracer): void {
  const remote = contextFromTraceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  tracer.startActiveSpan("migrate VirtualMachineInstance", { kind: SpanKind.SERVER }, remote, (root) => {
    root.setAttributes({ "kubevirt.migration.uid": "m1", skipped: undefined });
    tracer.startActiveSpan("send memory iteration", (step) => {
      step.setAttribute("migration.iteration", 2);
      step.setAttribute("migration.dirty_rate_bytes_per_sec", 1.5);
      step.addEvent("pages", { "migration.bytes": 4096 });
      step.end();
    });
    const now = Date.now();
    tracer.startSpan("switch over", { startTime: now - 20, attributes: { "migration.downtime_ms": 20 } }).end(now);
    root.setStatus({ code: SpanStatusCode.ERROR, message: "target gone" });
    root.end();
  });
}

/** A span without ids and times, to compare two recordings. */
function shape(s: OtlpSpan, byId: Map<string, string>) {
  const { traceId: _t, spanId: _s, startTimeUnixNano: _a, endTimeUnixNano: _b, parentSpanId, events, ...rest } = s;
  return {
    ...rest,
    parent: parentSpanId ? (byId.get(parentSpanId) ?? parentSpanId) : undefined,
    events: events.map(({ timeUnixNano: _, ...e }) => e),
  };
}

describe("FileTracerProvider", () => {
  it("writes what the SDK writes with the file exporter (names, kinds, parents, attributes, events, status)", async () => {
    const ours = new FileTracerProvider(join(dir, "ours.jsonl"), { "service.name": "virt-launcher" });
    scenario(ours.getTracer("virt-launcher"));
    await ours.shutdown();
    const sdk = new TracerProvider({
      spanProcessors: [new BatchSpanProcessor({ exporter: new FileSpanExporter(join(dir, "sdk.jsonl")) })],
    });
    scenario(sdk.getTracer("virt-launcher"));
    await sdk.shutdown();
    const compare = (file: string) => {
      const spans = spansOf(lines(file));
      const byId = new Map(spans.map((s) => [s.spanId, s.name]));
      return spans.map((s) => shape(s, byId)).sort((a, b) => a.name.localeCompare(b.name));
    };
    expect(compare(join(dir, "ours.jsonl"))).toEqual(compare(join(dir, "sdk.jsonl")));
    const [request] = lines(join(dir, "ours.jsonl"));
    expect(request.resourceSpans[0].resource.attributes).toEqual([
      { key: "service.name", value: { stringValue: "virt-launcher" } },
    ]);
    const spans = spansOf([request]);
    expect(new Set(spans.map((s) => s.traceId))).toEqual(new Set(["0af7651916cd43dd8448eb211c80319c"]));
    expect(spans.find((s) => s.name === "migrate VirtualMachineInstance")?.parentSpanId).toBe("b7ad6b7169203331");
  });

  it("records start and end times as given (epoch ms) and never ends before it starts", async () => {
    const provider = new FileTracerProvider(join(dir, "t.jsonl"), { "service.name": "t" });
    const tracer = provider.getTracer("t");
    const base = Date.now(); // an epoch time: after the process' time origin (earlier numbers are relative to it)
    tracer.startSpan("given", { startTime: base }, ROOT_CONTEXT).end(base + 250.5);
    tracer.startSpan("backwards", { startTime: base + 1_000 }, ROOT_CONTEXT).end(base);
    const t0 = BigInt(Date.now()) * 1_000_000n;
    tracer.startSpan("now", {}, ROOT_CONTEXT).end();
    await provider.shutdown();
    const spans = spansOf(lines(join(dir, "t.jsonl")));
    expect(spans.find((s) => s.name === "given")).toMatchObject({
      startTimeUnixNano: `${base}000000`,
      endTimeUnixNano: `${base + 250}500000`,
    });
    const backwards = spans.find((s) => s.name === "backwards");
    expect(backwards?.endTimeUnixNano).toBe(backwards?.startTimeUnixNano);
    const now = spans.find((s) => s.name === "now");
    expect(BigInt(now?.startTimeUnixNano ?? 0) - t0).toBeLessThan(50_000_000n);
    expect(BigInt(now?.startTimeUnixNano ?? 0) - t0).toBeGreaterThan(-50_000_000n);
  });

  it("keeps a span as it ended, an OK status final, and records nothing under an unsampled parent", async () => {
    const provider = new FileTracerProvider(join(dir, "t.jsonl"), { "service.name": "t" });
    const tracer = provider.getTracer("t");
    const span = tracer.startSpan("once", {}, ROOT_CONTEXT);
    span.setStatus({ code: SpanStatusCode.OK });
    span.setStatus({ code: SpanStatusCode.ERROR, message: "ignored" });
    expect(span.isRecording()).toBe(true);
    span.end();
    span.setAttribute("late", 1);
    span.end();
    expect(span.isRecording()).toBe(false);
    const unsampled = contextFromTraceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00");
    const child = tracer.startSpan("unsampled", {}, unsampled);
    expect(child.isRecording()).toBe(false);
    expect(child.spanContext().traceId).toBe("0af7651916cd43dd8448eb211c80319c");
    child.end();
    const failed = tracer.startSpan("failed", {}, ROOT_CONTEXT);
    failed.recordException(new TypeError("bad input"));
    failed.end();
    await provider.shutdown();
    tracer.startSpan("after shutdown", {}, ROOT_CONTEXT).end();
    const spans = spansOf(lines(join(dir, "t.jsonl")));
    expect(spans.map((s) => s.name).sort()).toEqual(["failed", "once"]);
    expect(spans.find((s) => s.name === "once")).toMatchObject({ attributes: [], status: { code: 1 } });
    expect(spans.find((s) => s.name === "failed")?.events[0]).toMatchObject({
      name: "exception",
      attributes: expect.arrayContaining([{ key: "exception.type", value: { stringValue: "TypeError" } }]),
    });
  });

  it("batches: nothing is written at once, a batch leaves within a second, forceFlush writes at once", async () => {
    const file = join(dir, "t.jsonl");
    const provider = new FileTracerProvider(file, { "service.name": "t" });
    const tracer = provider.getTracer("t");
    tracer.startSpan("a", {}, ROOT_CONTEXT).end();
    tracer.startSpan("b", {}, ROOT_CONTEXT).end();
    await new Promise((r) => setTimeout(r, 50));
    expect(() => readFileSync(file, "utf8")).toThrow();
    await new Promise((r) => setTimeout(r, 1_100));
    await provider.forceFlush();
    expect(lines(file)).toHaveLength(1);
    tracer.startSpan("c", {}, ROOT_CONTEXT).end();
    await provider.forceFlush();
    expect(spansOf(lines(file)).map((s) => s.name)).toEqual(["a", "b", "c"]);
    await provider.shutdown();
  });

  it("serves as the global provider: trace.getTracer spans join the active context", async () => {
    const provider = new FileTracerProvider(join(dir, "t.jsonl"), { "service.name": "t" });
    trace.setGlobalTracerProvider(provider);
    try {
      const tracer = trace.getTracer("global");
      await tracer.startActiveSpan("outer", async (outer) => {
        await new Promise((r) => setTimeout(r, 1));
        tracer.startSpan("inner").end();
        outer.end();
      });
      await provider.shutdown();
      const spans = spansOf(lines(join(dir, "t.jsonl")));
      const outer = spans.find((s) => s.name === "outer");
      expect(spans.find((s) => s.name === "inner")).toMatchObject({
        traceId: outer?.traceId,
        parentSpanId: outer?.spanId,
      });
    } finally {
      trace.disable();
    }
  });
});
