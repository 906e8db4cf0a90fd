/**
 * One Prometheus registry per app (never the global default), with process metrics, and the text exposition an
 * app serves on `/metrics`.
 */
import { collectDefaultMetrics, Registry } from "prom-client";

export { Counter, Gauge, Histogram, Registry, Summary } from "prom-client";

/**
 * Sampling interval (ms) of the event loop delay histogram behind `nodejs_eventloop_lag_{min,max,mean,p50,p90,p99}`:
 * a libuv timer that wakes the process this often, scraped or not. At prom-client's default, 10 ms, the default
 * metrics cost an idle process 5.2-5.5 ms of CPU per second over a bare registry (half a percent of a core, in
 * virt-api, virt-controller and each virt-handler, also while a migration's data transfer needs both cores of a small
 * node); at 100 ms, 0.8 ms/s (measured on the dev machine, a process answering one request per second). 100 ms still
 * takes 300 samples per 30 s scrape (KubeVirt's interval), and a stall of the loop delays the next tick however coarse
 * the interval, so it still shows.
 */
const EVENT_LOOP_SAMPLE_MS = 100;

/** Creates an app's registry with the standard process metrics (`process_*`, `nodejs_*`). */
export function createMetricsRegistry(options: { defaultMetrics?: boolean } = {}): Registry {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) {
    collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
  }
  return registry;
}

/** The body and content type of a `/metrics` response for `registry`. */
export async function exposition(registry: Registry): Promise<{ body: string; contentType: string }> {
  return { body: await registry.metrics(), contentType: registry.contentType };
}
