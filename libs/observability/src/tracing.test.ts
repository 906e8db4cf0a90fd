import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { context, trace } from "@opentelemetry/api";
import { afterEach, describe, expect, it } from "vitest";
import type { OtlpTraceRequest } from "./otlp-json.ts";
import {
  clientSpan,
  contextFromTraceparent,
  setupTracing,
  startTracing,
  type TracingHandle,
  traceExportTargets,
  traceparentOf,
} from "./tracing.ts";

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

describe("startTracing()", () => {
  it("is off unless configured, and exports parented spans to the trace file once awaited", async () => {
    handle = await startTracing({ serviceName: "virt-test", env: {} });
    expect(handle.enabled).toBe(false);
    dir = mkdtempSync(join(tmpdir(), "kvt-trace-"));
    const file = join(dir, "traces.jsonl");
    handle = await startTracing({ serviceName: "virt-launcher", env: { KUBEVIRT_TRACES_FILE: file } });
    expect(handle.enabled).toBe(true);
    const remote = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    trace.getTracer("test").startSpan("start VirtualMachineInstance", {}, contextFromTraceparent(remote)).end();
    await handle.shutdown();
    const request = JSON.parse(readFileSync(file, "utf8")) as OtlpTraceRequest;
    expect(request.resourceSpans[0].resource.attributes).toContainEqual({
      key: "service.name",
      value: { stringValue: "virt-launcher" },
    });
    const span = request.resourceSpans[0].scopeSpans[0].spans[0];
    expect(span).toMatchObject({ name: "start VirtualMachineInstance", parentSpanId: "b7ad6b7169203331" });
  });
});

describe("clientSpan()", () => {
  it("hands the call the traceparent of a CLIENT span and records a failure", async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-trace-"));
    const file = join(dir, "traces.jsonl");
    handle = setupTracing({ serviceName: "virtctl", env: { KUBEVIRT_TRACES_FILE: file } });
    const sent = await clientSpan("migrate VirtualMachine", { "kubevirt.vm.name": "vm1" }, async (tp) => tp);
    await expect(clientSpan("stop VirtualMachine", {}, () => Promise.reject(new Error("refused")))).rejects.toThrow(
      "refused",
    );
    await handle.shutdown();
    const spans = readFileSync(file, "utf8")
      .trim()
      .split("\n")
      .flatMap((l) => (JSON.parse(l) as OtlpTraceRequest).resourceSpans.flatMap((r) => r.scopeSpans))
      .flatMap((s) => s.spans);
    const migrate = spans.find((s) => s.name === "migrate VirtualMachine");
    expect(sent).toBe(`00-${migrate?.traceId}-${migrate?.spanId}-01`);
    expect(migrate?.kind).toBe(3); // OTLP SPAN_KIND_CLIENT
    expect(migrate?.attributes).toContainEqual({ key: "kubevirt.vm.name", value: { stringValue: "vm1" } });
    expect(spans.find((s) => s.name === "stop VirtualMachine")?.status).toEqual({ code: 2, message: "refused" });
  });

  it("sends no traceparent when nothing is traced", async () => {
    handle = setupTracing({ serviceName: "virtctl", env: {} });
    expect(await clientSpan("migrate VirtualMachine", {}, async (tp) => tp)).toBeUndefined();
  });
});

describe("traceExportTargets()", () => {
  it.each([
    [{}, {}],
    [{ KUBEVIRT_TRACES_FILE: "/t.jsonl" }, { file: "/t.jsonl" }],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318/" }, { endpoint: "http://c:4318/v1/traces" }],
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://t/x" },
      { endpoint: "http://t/x" },
    ],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_TRACES_EXPORTER: "none" }, {}],
    [{ KUBEVIRT_TRACES_FILE: "/t.jsonl", OTEL_SDK_DISABLED: "true" }, {}],
  ])("%j -> %j", (env, targets) => {
    expect(traceExportTargets(env)).toEqual(targets);
  });
});

describe("setupTracing() module loading", () => {
  /** The @opentelemetry packages a fresh process loads for `env`, through setupTracing() and a traced span. */
  function packagesLoaded(env: Record<string, string>): string[] {
    const script = `
      import { registerHooks } from "node:module";
      const seen = new Set();
      registerHooks({ resolve(specifier, context, next) {
        const r = next(specifier, context);
        const m = new RegExp("node_modules/(@opentelemetry/[^/]+)/").exec(r.url);
        if (m) seen.add(m[1]);
        return r;
      } });
      const { setupTracing, traceparentOf, contextFromTraceparent } = await import(${JSON.stringify(new URL("./index.ts", import.meta.url).href)});
      const { context, trace } = await import("@opentelemetry/api");
      const handle = setupTracing({ serviceName: "probe", env: ${JSON.stringify(env)} });
      const parent = contextFromTraceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
      const span = trace.getTracer("probe").startSpan("probe", {}, parent);
      const tp = context.with(trace.setSpan(parent, span), () => traceparentOf());
      span.end();
      await handle.shutdown();
      if (!tp?.startsWith("00-0af7651916cd43dd8448eb211c80319c-")) throw new Error("trace context lost: " + tp);
      process.stdout.write(JSON.stringify([...seen].sort()));`;
    const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" });
    return JSON.parse(out) as string[];
  }

  // The probe runs Node's module hooks in a child process (the Deno lane runs this file under Deno).
  it.skipIf("Deno" in globalThis)("loads no SDK package when nothing is exported, yet passes trace context on", () => {
    expect(packagesLoaded({})).toEqual(["@opentelemetry/api", "@opentelemetry/context-async-hooks"]);
  });

  it.skipIf("Deno" in globalThis)("loads no SDK package for a trace file alone (FileTracerProvider)", () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-trace-"));
    const loaded = packagesLoaded({ KUBEVIRT_TRACES_FILE: join(dir, "t.jsonl") });
    expect(loaded).toEqual(["@opentelemetry/api", "@opentelemetry/context-async-hooks"]);
    expect(readFileSync(join(dir, "t.jsonl"), "utf8")).toContain('"name":"probe"');
  });
});
