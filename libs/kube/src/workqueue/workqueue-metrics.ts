/**
 * The `kubevirt_workqueue_*` metrics (label `name`, the queue's name such as `virt-controller-vm`), registered
 * once per registry and shared by every queue on it.
 */
import { Counter, Gauge, Histogram, type Registry } from "prom-client";

const buckets = [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.1, 1, 10];

/** The seven workqueue series. */
export interface WorkqueueMetrics {
  readonly adds: Counter<"name">;
  readonly depth: Gauge<"name">;
  readonly queueDuration: Histogram<"name">;
  readonly workDuration: Histogram<"name">;
  readonly retries: Counter<"name">;
  readonly unfinishedWork: Gauge<"name">;
  readonly longestRunning: Gauge<"name">;
}

const byRegistry = new WeakMap<Registry, WorkqueueMetrics>();

/** The workqueue metrics on `registry`, created on first use. */
export function workqueueMetrics(registry: Registry): WorkqueueMetrics {
  let m = byRegistry.get(registry);
  if (m) return m;
  const registers = [registry];
  const labelNames = ["name"] as const;
  m = {
    adds: new Counter({
      name: "kubevirt_workqueue_adds_total",
      help: "Total number of adds handled by a workqueue.",
      labelNames,
      registers,
    }),
    depth: new Gauge({
      name: "kubevirt_workqueue_depth",
      help: "Current depth of a workqueue.",
      labelNames,
      registers,
    }),
    queueDuration: new Histogram({
      name: "kubevirt_workqueue_queue_duration_seconds",
      help: "How long in seconds an item stays in a workqueue before being requested.",
      labelNames,
      buckets,
      registers,
    }),
    workDuration: new Histogram({
      name: "kubevirt_workqueue_work_duration_seconds",
      help: "How long in seconds processing an item from a workqueue takes.",
      labelNames,
      buckets,
      registers,
    }),
    retries: new Counter({
      name: "kubevirt_workqueue_retries_total",
      help: "Total number of retries handled by a workqueue.",
      labelNames,
      registers,
    }),
    unfinishedWork: new Gauge({
      name: "kubevirt_workqueue_unfinished_work_seconds",
      help: "How many seconds of work has been done that is in progress and has not been observed by work_duration.",
      labelNames,
      registers,
    }),
    longestRunning: new Gauge({
      name: "kubevirt_workqueue_longest_running_processor_seconds",
      help: "How many seconds the longest running processor of a workqueue has been running.",
      labelNames,
      registers,
    }),
  };
  byRegistry.set(registry, m);
  return m;
}
