/**
 * OpenTelemetry setup for an app (libraries only use @opentelemetry/api). Off unless configured:
 *  - `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` (+ `/v1/traces`): OTLP/HTTP JSON export;
 *  - `KUBEVIRT_TRACES_FILE=<path>`: every export appended to the file as one OTLP/JSON line (the local cluster's
 *    `npm start -- --traces FILE`); several processes may append to the same file (see {@link FileSpanExporter}).
 *    With the file alone, spans are recorded by {@link FileTracerProvider}, without the SDK.
 *  - `OTEL_TRACES_EXPORTER=none` or `OTEL_SDK_DISABLED=true` turn it off.
 * The SDK (about 200 ms of CPU to import, the OTLP exporter half of it) is loaded only for an OTLP endpoint or extra
 * span processors, the OTLP exporter only when an endpoint is configured. setupTracing loads it synchronously
 * (`require` of the packages' ES module builds, the same instances `import` gives), so it stays synchronous and no
 * span started right after it is lost; startTracing loads it with `import()`, for apps that await it (bundlers split
 * it into chunks).
 * Context propagates in-process through AsyncLocalStorage, across HTTP in the W3C `traceparent` header, and across
 * objects in the `kubevirt.io/traceparent` annotation (see {@link traceparentOf} / {@link contextFromTraceparent}).
 */
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import {
  type Attributes,
  type Context,
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
} from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import type * as OtlpHttp from "@opentelemetry/exporter-trace-otlp-http";
import type * as Resources from "@opentelemetry/resources";
import type * as SdkTrace from "@opentelemetry/sdk-trace";
import type { SpanProcessor } from "@opentelemetry/sdk-trace";
import { FileSpanExporter } from "./file-span-exporter.ts";
import { FileTracerProvider } from "./file-tracer.ts";
import { W3CTraceparentPropagator } from "./w3c-propagator.ts";

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

/** Where spans go per `env`: an OTLP/HTTP endpoint, a file, both, or nowhere. */
export function traceExportTargets(env: Record<string, string | undefined>): { endpoint?: string; file?: string } {
  if (env.OTEL_SDK_DISABLED === "true" || env.OTEL_TRACES_EXPORTER === "none") return {};
  const endpoint =
    env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ??
    (env.OTEL_EXPORTER_OTLP_ENDPOINT ? `${env.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/$/, "")}/v1/traces` : undefined);
  return {
    ...(endpoint ? { endpoint } : {}),
    ...(env.KUBEVIRT_TRACES_FILE ? { file: env.KUBEVIRT_TRACES_FILE } : {}),
  };
}

const requireHere = createRequire(import.meta.url);

/**
 * Loads `specifier` synchronously. `import.meta.resolve` applies the `import` condition, so `require` (of an ES module,
 * Node 22.12+ / Deno 2) returns the instance a static `import` of it would, with one copy of @opentelemetry/api.
 * Where `import.meta.resolve` is missing (some test runners' module loaders) the package's CommonJS build is loaded,
 * which shares the API's globals (the API keeps its registrations on `globalThis` for exactly this case).
 */
function loadSync<T>(specifier: string): T {
  let target = specifier;
  try {
    target = fileURLToPath(import.meta.resolve(specifier));
  } catch {
    // no import.meta.resolve here: fall back to require's own resolution
  }
  return requireHere(target) as T;
}

/** The SDK modules a provider is built from. */
interface SdkModules {
  readonly sdk: typeof SdkTrace;
  readonly resources: typeof Resources;
  readonly otlp?: typeof OtlpHttp;
}

type Plan = { readonly handle: TracingHandle } | { readonly targets: ReturnType<typeof traceExportTargets> };

/**
 * Installs propagation (always) and says what else to do: nothing more (a handle: no export, or export to the trace
 * file alone, which needs no SDK: {@link FileTracerProvider}) or load the SDK and export to `targets`.
 */
function plan(options: TracingOptions): Plan {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceparentPropagator());
  const targets = traceExportTargets(options.env ?? process.env);
  const extra = (options.extraProcessors ?? []).length > 0;
  if (!targets.endpoint && !targets.file && !extra) {
    return { handle: { enabled: false, shutdown: async () => {} } };
  }
  if (targets.file && !targets.endpoint && !extra) {
    const provider = new FileTracerProvider(targets.file, resourceAttributes(options));
    trace.setGlobalTracerProvider(provider);
    let stopped: Promise<void> | undefined;
    return { handle: { enabled: true, shutdown: () => (stopped ??= provider.shutdown()) } };
  }
  return { targets };
}

/** The resource attributes of every span of this process. */
function resourceAttributes(options: TracingOptions): Record<string, string> {
  return {
    "service.name": options.serviceName,
    ...(options.serviceVersion ? { "service.version": options.serviceVersion } : {}),
    ...options.attributes,
  };
}

/** Installs a tracer provider exporting to `targets`. */
function install(
  options: TracingOptions,
  targets: ReturnType<typeof traceExportTargets>,
  m: SdkModules,
): TracingHandle {
  const processors: SpanProcessor[] = [...(options.extraProcessors ?? [])];
  if (targets.endpoint && m.otlp) {
    const exporter = new m.otlp.OTLPTraceExporter({ url: targets.endpoint });
    processors.push(new m.sdk.BatchSpanProcessor({ exporter }));
  }
  if (targets.file) {
    // One write per second at most: a span reaches the file within a second, and shutdown flushes the rest.
    const exporter = new FileSpanExporter(targets.file);
    processors.push(new m.sdk.BatchSpanProcessor({ exporter, scheduledDelayMillis: 1_000 }));
  }
  const provider = new m.sdk.TracerProvider({
    resource: m.resources.resourceFromAttributes(resourceAttributes(options)),
    spanProcessors: processors,
  });
  trace.setGlobalTracerProvider(provider);
  let stopped: Promise<void> | undefined;
  return {
    enabled: true,
    shutdown: () => (stopped ??= provider.shutdown()),
  };
}

/**
 * Installs the global context manager and W3C propagator for this process and, per the environment, a tracer
 * provider with its exporters. Call once from the app's composition root. Propagation is installed even when this
 * process exports nothing, so trace context passes through it. Loads the SDK synchronously (see {@link loadSync});
 * an app that can wait should prefer {@link startTracing}.
 */
export function setupTracing(options: TracingOptions): TracingHandle {
  const p = plan(options);
  if ("handle" in p) return p.handle;
  return install(options, p.targets, {
    sdk: loadSync<typeof SdkTrace>("@opentelemetry/sdk-trace"),
    resources: loadSync<typeof Resources>("@opentelemetry/resources"),
    ...(p.targets.endpoint ? { otlp: loadSync<typeof OtlpHttp>("@opentelemetry/exporter-trace-otlp-http") } : {}),
  });
}

/**
 * {@link setupTracing} for an app that awaits it before starting work: the SDK comes in through `import()` of literal
 * specifiers, which bundlers split into chunks of their own (loaded, and compile-cached, only when tracing is on)
 * and which always yields the one ES module instance of each package. Nothing is imported when nothing is exported.
 */
export async function startTracing(options: TracingOptions): Promise<TracingHandle> {
  const p = plan(options);
  if ("handle" in p) return p.handle;
  const [sdk, resources, otlp] = await Promise.all([
    import("@opentelemetry/sdk-trace"),
    import("@opentelemetry/resources"),
    p.targets.endpoint ? import("@opentelemetry/exporter-trace-otlp-http") : undefined,
  ]);
  return install(options, p.targets, { sdk, resources, ...(otlp ? { otlp } : {}) });
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

/**
 * Runs an outgoing call as a CLIENT span named `name` (low-cardinality, e.g. `migrate VirtualMachine`), handing `call`
 * the span's W3C traceparent to send along, so the server's spans become its children. With no tracer provider
 * installed the span is a no-op and `call` gets the traceparent of the active context, if any.
 */
export function clientSpan<T>(
  name: string,
  attributes: Attributes,
  call: (traceparent: string | undefined) => Promise<T>,
): Promise<T> {
  return trace.getTracer("kubevirt-ts").startActiveSpan(name, { kind: SpanKind.CLIENT, attributes }, async (span) => {
    try {
      return await call(traceparentOf());
    } catch (error) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
      throw error;
    } finally {
      span.end();
    }
  });
}
