/** Logging, metrics and tracing plumbing shared by every component. */

/** The trace file exporter (`KUBEVIRT_TRACES_FILE`): one OTLP/JSON line per batch, written asynchronously. */
export { FileSpanExporter } from "./file-span-exporter.ts";
/** The SDK-free tracer provider of a process that exports spans to the trace file only. */
export { FileTracerProvider } from "./file-tracer.ts";
/** Log output that drops and counts what it cannot write (full disk, closed pipe) instead of throwing. */
export {
  DroppingDestination,
  type DroppingDestinationOptions,
  guardStdio,
  stdoutLogDestination,
} from "./log-destination.ts";
/** Structured logger creation and per-object child loggers. */
export { createLogger, forObject, type Logger, type LoggerOptions, type ObjectIdentity } from "./logger.ts";
/** Per-app Prometheus registry and metric classes. */
export { Counter, createMetricsRegistry, exposition, Gauge, Histogram, Registry, Summary } from "./metrics.ts";
/** The `/metrics`, `/healthz`, `/readyz` endpoint every component serves. */
export { type MetricsServer, type MetricsServerOptions, startMetricsServer } from "./metrics-server.ts";
/** OTLP/JSON encoding of spans (the trace file format). */
export {
  type ExportableSpan,
  type OtlpAnyValue,
  type OtlpKeyValue,
  type OtlpSpan,
  type OtlpTraceRequest,
  toOtlpAttributes,
  toOtlpRequest,
} from "./otlp-json.ts";
/** Free-text failure reasons mapped to bounded label values. */
export {
  MIGRATION_FAILURE_REASONS,
  type MigrationFailureReason,
  migrationFailureReason,
} from "./reason-label.ts";
/** Per-app tracing setup (the SDK is loaded only when spans are exported) and trace-context helpers. */
export {
  clientSpan,
  contextFromTraceparent,
  setupTracing,
  startTracing,
  type TracingHandle,
  type TracingOptions,
  traceExportTargets,
  traceparentOf,
} from "./tracing.ts";
/** W3C `traceparent` formatting, parsing and propagation without @opentelemetry/core. */
export { formatTraceparent, parseTraceparent, W3CTraceparentPropagator } from "./w3c-propagator.ts";
