/** Logging, metrics and tracing plumbing shared by every component. */

/** Structured logger creation and per-object child loggers. */
export { createLogger, forObject, type Logger, type LoggerOptions, type ObjectIdentity } from "./logger.ts";
/** Per-app Prometheus registry and metric classes. */
export { Counter, createMetricsRegistry, exposition, Gauge, Histogram, Registry, Summary } from "./metrics.ts";
