/**
 * OpenTelemetry setup for an app (libraries only use @opentelemetry/api). Off unless configured:
 *  - `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` (+ `/v1/traces`): OTLP/HTTP JSON export;
 *  - `KUBEVIRT_TRACES_FILE=<path>`: every export appended to the file as one OTLP/JSON line (the local cluster's
 *    `npm start -- --traces FILE`); several processes may append to the same file (one `appendFileSync` per batch).
 *  - `OTEL_TRACES_EXPORTER=none` or `OTEL_SDK_DISABLED=true` turn it off.
 * Context propagates in-process through AsyncLocalStorage, across HTTP in the W3C `traceparent` header, and across
 * objects in the `kubevirt.io/traceparent` annotation (see {@link traceparentOf} / {@link contextFromTraceparent}).
 */
import { appendFileSync } from "node:fs";
import { type Context, context, propagation, ROOT_CONTEXT, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { type ExportResult, ExportResultCode, W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  BatchSpanProcessor,
  type ReadableSpan,
  type SpanExporter,
  type SpanProcessor,
  TracerProvider,
} from "@opentelemetry/sdk-trace";
import { toOtlpRequest } from "./otlp-json.ts";

/** What {@link setupTracing} returns: flush and stop before the process exits. */
export interface TracingHandle {
  /** True when spans are exported somewhere. */
  readonly enabled: boolean;
  /** Exports pending spans and stops. Safe to call more than once. */
  shutdown(): Promise<void>;
}

/** Options for {@link setupTracing}. */
export interface TracingOptions {
  /** `service.name`, e.g. `virt-handler`. */
  readonly serviceName: string;
  readonly serviceVersion?: string;
  /** Extra resource attributes (e.g. `k8s.node.name`). */
  readonly attributes?: Record<string, string>;
  /** Environment to read; default `process.env`. */
  readonly env?: Record<string, string | undefined>;
  /** Span processors to add (tests pass a SimpleSpanProcessor over an InMemorySpanExporter). */
  readonly extraProcessors?: SpanProcessor[];
}

/** A SpanExporter that appends each batch to a file as one OTLP/JSON line. */
export class FileSpanExporter implements SpanExporter {
  readonly #path: string;
  constructor(path: string) {
    this.#path = path;
  }
  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    try {
      appendFileSync(this.#path, `${JSON.stringify(toOtlpRequest(spans))}\n`);
      done({ code: ExportResultCode.SUCCESS });
    } catch (error) {
      done({ code: ExportResultCode.FAILED, error: error as Error });
    }
  }
  async shutdown(): Promise<void> {}
}

/**
 * Installs the global tracer provider, context manager and W3C propagator for this process, per the environment.
 * Call once from the app's composition root. Always installs propagation (so trace context passes through even
 * when this process exports nothing).
 */
export function setupTracing(options: TracingOptions): TracingHandle {
  const env = options.env ?? process.env;
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  const processors: SpanProcessor[] = [...(options.extraProcessors ?? [])];
  const disabled = env.OTEL_SDK_DISABLED === "true" || env.OTEL_TRACES_EXPORTER === "none";
  if (!disabled) {
    const endpoint =
      env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ??
      (env.OTEL_EXPORTER_OTLP_ENDPOINT ? `${env.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/$/, "")}/v1/traces` : undefined);
    if (endpoint) processors.push(new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url: endpoint }) }));
    if (env.KUBEVIRT_TRACES_FILE) {
      processors.push(
        new BatchSpanProcessor({ exporter: new FileSpanExporter(env.KUBEVIRT_TRACES_FILE), scheduledDelayMillis: 500 }),
      );
    }
  }
  if (processors.length === 0) return { enabled: false, shutdown: async () => {} };
  const provider = new TracerProvider({
    resource: resourceFromAttributes({
      "service.name": options.serviceName,
      ...(options.serviceVersion ? { "service.version": options.serviceVersion } : {}),
      ...options.attributes,
    }),
    spanProcessors: processors,
  });
  trace.setGlobalTracerProvider(provider);
  let stopped: Promise<void> | undefined;
  return {
    enabled: true,
    shutdown: () => (stopped ??= provider.shutdown()),
  };
}

const carrierGetter = {
  get: (carrier: Record<string, string | undefined>, key: string) => carrier[key],
  keys: (carrier: Record<string, string | undefined>) => Object.keys(carrier),
};

/** The W3C traceparent of the span active in `ctx` (default: the current context), or undefined when none. */
export function traceparentOf(ctx: Context = context.active()): string | undefined {
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  return carrier.traceparent;
}

/** A context whose remote parent is `traceparent` (from an annotation or header); the root context if absent. */
export function contextFromTraceparent(traceparent: string | undefined): Context {
  if (!traceparent) return ROOT_CONTEXT;
  return propagation.extract(ROOT_CONTEXT, { traceparent }, carrierGetter);
}
