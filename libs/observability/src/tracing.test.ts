import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { context, trace } from "@opentelemetry/api";
import { afterEach, describe, expect, it } from "vitest";
import type { OtlpTraceRequest } from "./otlp-json.ts";
import { contextFromTraceparent, setupTracing, type TracingHandle, traceparentOf } from "./tracing.ts";

let handle: TracingHandle | undefined;
let dir: string | undefined;
afterEach(async () => {
  await handle?.shutdown();
  trace.disable();
  context.disable();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("setupTracing()", () => {
  it("is off unless configured", () => {
    handle = setupTracing({ serviceName: "virt-test", env: {} });
    expect(handle.enabled).toBe(false);
  });

  it("writes parented spans as OTLP/JSON lines to KUBEVIRT_TRACES_FILE", async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-trace-"));
    const file = join(dir, "traces.jsonl");
    handle = setupTracing({ serviceName: "virt-test", serviceVersion: "1.0.0", env: { KUBEVIRT_TRACES_FILE: file } });
    expect(handle.enabled).toBe(true);
    const tracer = trace.getTracer("test");
    let childTraceparent: string | undefined;
    tracer.startActiveSpan("migrate VirtualMachineInstance", (parent) => {
      tracer.startActiveSpan("send memory iteration", (child) => {
        child.setAttribute("migration.iteration", 3);
        childTraceparent = traceparentOf();
        child.end();
      });
      parent.end();
    });
    await handle.shutdown();
    const request = JSON.parse(readFileSync(file, "utf8").trim().split("\n")[0]) as OtlpTraceRequest;
    const rs = request.resourceSpans[0];
    expect(rs.resource.attributes).toContainEqual({ key: "service.name", value: { stringValue: "virt-test" } });
    const spans = rs.scopeSpans.flatMap((s) => s.spans);
    const parent = spans.find((s) => s.name === "migrate VirtualMachineInstance");
    const child = spans.find((s) => s.name === "send memory iteration");
    expect(child?.parentSpanId).toBe(parent?.spanId);
    expect(child?.traceId).toBe(parent?.traceId);
    expect(child?.attributes).toContainEqual({ key: "migration.iteration", value: { intValue: "3" } });
    expect(childTraceparent).toBe(`00-${child?.traceId}-${child?.spanId}-01`);
  });

  it("continues a trace from a traceparent annotation", async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-trace-"));
    const file = join(dir, "traces.jsonl");
    handle = setupTracing({ serviceName: "virt-test", env: { KUBEVIRT_TRACES_FILE: file } });
    const remote = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    trace
      .getTracer("test")
      .startSpan("reconcile VirtualMachineInstanceMigration", {}, contextFromTraceparent(remote))
      .end();
    await handle.shutdown();
    const span = (JSON.parse(readFileSync(file, "utf8")) as OtlpTraceRequest).resourceSpans[0].scopeSpans[0].spans[0];
    expect(span.traceId).toBe("0af7651916cd43dd8448eb211c80319c");
    expect(span.parentSpanId).toBe("b7ad6b7169203331");
  });
});
