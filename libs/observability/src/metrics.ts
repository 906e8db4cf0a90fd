/**
 * One Prometheus registry per app (never the global default), with process metrics, and the text exposition an
 * app serves on `/metrics`.
 */
import { collectDefaultMetrics, Registry } from "prom-client";

export { Counter, Gauge, Histogram, Registry, Summary } from "prom-client";

/** Creates an app's registry with the standard process metrics (`process_*`, `nodejs_*`). */
export function createMetricsRegistry(options: { defaultMetrics?: boolean } = {}): Registry {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });
  return registry;
}

/** The body and content type of a `/metrics` response for `registry`. */
export async function exposition(registry: Registry): Promise<{ body: string; contentType: string }> {
  return { body: await registry.metrics(), contentType: registry.contentType };
}
