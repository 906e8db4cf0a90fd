import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT_CONTEXT } from "@opentelemetry/api";
import { ExportResultCode } from "@opentelemetry/core";
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { afterEach, describe, expect, it } from "vitest";
import { FileSpanExporter } from "./file-span-exporter.ts";
import type { OtlpTraceRequest } from "./otlp-json.ts";

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Finished spans named `names`, from a throwaway provider. */
async function spans(...names: string[]) {
  const memory = new InMemorySpanExporter();
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: memory })] });
  const tracer = provider.getTracer("test");
  for (const n of names) tracer.startSpan(n, {}, ROOT_CONTEXT).end();
  await provider.forceFlush(); // SimpleSpanProcessor exports asynchronously
  return memory.getFinishedSpans();
}

describe("FileSpanExporter", () => {
  it("appends one OTLP/JSON line per batch, in export order, without writing synchronously", async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-file-exporter-"));
    const file = join(dir, "traces.jsonl");
    const exporter = new FileSpanExporter(file);
    const results: ExportResultCode[] = [];
    const batches = await Promise.all(["first", "second", "third"].map((n) => spans(n)));
    for (const batch of batches) exporter.export(batch, (r) => results.push(r.code));
    // Nothing is written before the event loop turns: the export call does not block on the file.
    expect(() => readFileSync(file, "utf8")).toThrow();
    await exporter.forceFlush();
    expect(results).toEqual([ExportResultCode.SUCCESS, ExportResultCode.SUCCESS, ExportResultCode.SUCCESS]);
    const lines = readFileSync(file, "utf8").trim().split("\n");
    const names = lines.map((l) => (JSON.parse(l) as OtlpTraceRequest).resourceSpans[0].scopeSpans[0].spans[0].name);
    expect(names).toEqual(["first", "second", "third"]);
    await exporter.shutdown();
  });

  it("flushes queued batches on shutdown and refuses batches after it", async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-file-exporter-"));
    const file = join(dir, "traces.jsonl");
    const exporter = new FileSpanExporter(file);
    exporter.export(await spans("a", "b"), () => {});
    await exporter.shutdown();
    const request = JSON.parse(readFileSync(file, "utf8")) as OtlpTraceRequest;
    expect(request.resourceSpans[0].scopeSpans[0].spans.map((s) => s.name)).toEqual(["a", "b"]);
    const lateBatch = await spans("late");
    const late = await new Promise<ExportResultCode>((r) => exporter.export(lateBatch, (x) => r(x.code)));
    expect(late).toBe(ExportResultCode.FAILED);
    expect(readFileSync(file, "utf8").trim().split("\n")).toHaveLength(1);
  });

  it("reports a failed write (the file cannot be opened)", async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-file-exporter-"));
    const exporter = new FileSpanExporter(join(dir, "missing-dir", "traces.jsonl"));
    const batch = await spans("x");
    const result = await new Promise<ExportResultCode>((r) => exporter.export(batch, (x) => r(x.code)));
    expect(result).toBe(ExportResultCode.FAILED);
    await exporter.shutdown();
  });
});
