/** Logging, metrics and tracing plumbing shared by every component. */

/** Structured logger creation and per-object child loggers. */
export { createLogger, forObject, type Logger, type LoggerOptions, type ObjectIdentity } from "./logger.ts";
/** Per-app Prometheus registry and metric classes. */
export { Counter, createMetricsRegistry, exposition, Gauge, Histogram, Registry, Summary } from "./metrics.ts";
/** The `/metrics`, `/healthz`, `/readyz` endpoint every component serves. */
export { type MetricsServer, type MetricsServerOptions, startMetricsServer } from "./metrics-server.ts";
/** OTLP/JSON encoding of spans (the trace file format). */
export {
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
/** Per-app tracing setup and trace-context helpers for annotations and headers. */
export {
  contextFromTraceparent,
  FileSpanExporter,
  setupTracing,
  type TracingHandle,
  type TracingOptions,
  traceparentOf,
} from "./tracing.ts";
