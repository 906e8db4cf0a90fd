/**
 * Every metric the platform exports, by component: the contract between the components (which register them),
 * the dashboards and rules (which query them) and the e2e test (which checks each is really served).
 * KubeVirt's names and labels where KubeVirt has the metric; `kubevirt_<component>_<thing>_<unit>` otherwise.
 * Per-VMI series (labels `name`, `namespace`) come only from virt-handler. No label takes unbounded values.
 */

/**
 * Which process serves a metric: one component, `all` of them (the API client), or `controllers` (virt-controller
 * and virt-handler, the components that run workqueues).
 */
export type Component = "virt-api" | "virt-controller" | "virt-handler" | "all" | "controllers";

/** One exported metric family. */
export interface MetricSpec {
  readonly name: string;
  readonly type: "counter" | "gauge" | "histogram";
  readonly component: Component;
  readonly labels: readonly string[];
  /** True when KubeVirt exports the same name. */
  readonly kubevirt: boolean;
  readonly help: string;
}

const m = (
  name: string,
  type: MetricSpec["type"],
  component: Component,
  labels: string[],
  kubevirt: boolean,
  help: string,
): MetricSpec => ({
  name,
  type,
  component,
  labels,
  kubevirt,
  help,
});

/** The catalog. */
export const METRICS: readonly MetricSpec[] = [
  // Every component
  m(
    "kubevirt_workqueue_adds_total",
    "counter",
    "controllers",
    ["name"],
    true,
    "Total number of adds handled by the workqueue.",
  ),
  m("kubevirt_workqueue_depth", "gauge", "controllers", ["name"], true, "Current depth of the workqueue."),
  m(
    "kubevirt_workqueue_queue_duration_seconds",
    "histogram",
    "controllers",
    ["name"],
    true,
    "How long an item stays in the workqueue before being processed.",
  ),
  m(
    "kubevirt_workqueue_work_duration_seconds",
    "histogram",
    "controllers",
    ["name"],
    true,
    "How long processing an item from the workqueue takes.",
  ),
  m(
    "kubevirt_workqueue_retries_total",
    "counter",
    "controllers",
    ["name"],
    true,
    "Total number of retries handled by the workqueue.",
  ),
  m(
    "kubevirt_workqueue_unfinished_work_seconds",
    "gauge",
    "controllers",
    ["name"],
    true,
    "Seconds of work in progress not yet observed by work_duration.",
  ),
  m(
    "kubevirt_workqueue_longest_running_processor_seconds",
    "gauge",
    "controllers",
    ["name"],
    true,
    "Seconds the longest running processor has been running.",
  ),
  m(
    "kubevirt_rest_client_requests_total",
    "counter",
    "all",
    ["code", "method", "host", "resource", "verb"],
    true,
    "Number of HTTP requests to the API server, by status code, method and resource.",
  ),
  m(
    "kubevirt_rest_client_request_latency_seconds",
    "histogram",
    "all",
    ["verb", "url"],
    true,
    "Request latency to the API server in seconds, by verb and URL template.",
  ),
  // virt-controller
  m(
    "kubevirt_virt_controller_leading_status",
    "gauge",
    "virt-controller",
    [],
    true,
    "Whether this virt-controller is the leader (1) or a standby (0).",
  ),
  m(
    "kubevirt_virt_controller_ready_status",
    "gauge",
    "virt-controller",
    [],
    true,
    "Whether this virt-controller is ready to serve (1) or not (0).",
  ),
  m(
    "kubevirt_vmi_phase_count",
    "gauge",
    "virt-controller",
    ["node", "phase"],
    true,
    "Number of VMIs by node and phase.",
  ),
  m(
    "kubevirt_vmi_phase_transition_time_from_creation_seconds",
    "histogram",
    "virt-controller",
    ["phase"],
    true,
    "Seconds from a VMI's creation to each phase transition.",
  ),
  m(
    "kubevirt_vmi_migrations_in_pending_phase",
    "gauge",
    "virt-controller",
    [],
    true,
    "Number of current migrations in the Pending phase.",
  ),
  m(
    "kubevirt_vmi_migrations_in_scheduling_phase",
    "gauge",
    "virt-controller",
    [],
    true,
    "Number of current migrations in the Scheduling phase.",
  ),
  m(
    "kubevirt_vmi_migrations_in_running_phase",
    "gauge",
    "virt-controller",
    [],
    true,
    "Number of current migrations in the Running phase.",
  ),
  m(
    "kubevirt_vmi_migration_succeeded",
    "counter",
    "virt-controller",
    ["namespace"],
    true,
    "Number of migrations that succeeded.",
  ),
  m(
    "kubevirt_vmi_migration_failed",
    "counter",
    "virt-controller",
    ["namespace", "reason"],
    true,
    "Number of migrations that failed, by failure reason.",
  ),
  m(
    "kubevirt_vmi_migration_phase_transition_time_from_creation_seconds",
    "histogram",
    "virt-controller",
    ["phase"],
    true,
    "Seconds from a migration's creation to each phase transition.",
  ),
  // virt-api
  m(
    "kubevirt_virt_api_ready_status",
    "gauge",
    "virt-api",
    [],
    false,
    "Whether virt-api is ready to serve (1) or not (0).",
  ),
  m(
    "kubevirt_console_active_connections",
    "gauge",
    "virt-api",
    ["namespace"],
    true,
    "Number of active serial console connections.",
  ),
  m(
    "kubevirt_portforward_active_tunnels",
    "gauge",
    "virt-api",
    ["namespace"],
    true,
    "Number of active port-forward tunnels.",
  ),
  m(
    "kubevirt_virt_api_requests_total",
    "counter",
    "virt-api",
    ["handler", "code"],
    false,
    "Requests to virt-api's webhooks and subresources, by handler and status code.",
  ),
  // virt-handler: node and per-VMI
  m(
    "kubevirt_virt_handler_ready_status",
    "gauge",
    "virt-handler",
    ["node"],
    true,
    "Whether this virt-handler is ready (1) or not (0).",
  ),
  m(
    "kubevirt_vmi_vcpu_seconds_total",
    "counter",
    "virt-handler",
    ["name", "namespace", "node", "id", "state"],
    true,
    "Seconds each vCPU of a VMI spent in each state.",
  ),
  m(
    "kubevirt_vmi_memory_domain_bytes",
    "gauge",
    "virt-handler",
    ["name", "namespace", "node"],
    true,
    "Memory size of the VMI's guest in bytes.",
  ),
  m(
    "kubevirt_vmi_memory_resident_bytes",
    "gauge",
    "virt-handler",
    ["name", "namespace", "node"],
    true,
    "Resident memory of the VMI's guest on the host in bytes.",
  ),
  m(
    "kubevirt_vmi_migration_data_processed_bytes",
    "gauge",
    "virt-handler",
    ["name", "namespace", "node"],
    true,
    "Bytes of guest memory sent so far by the running migration.",
  ),
  m(
    "kubevirt_vmi_migration_data_remaining_bytes",
    "gauge",
    "virt-handler",
    ["name", "namespace", "node"],
    true,
    "Bytes of guest memory still to send by the running migration.",
  ),
  m(
    "kubevirt_vmi_migration_dirty_memory_rate_bytes",
    "gauge",
    "virt-handler",
    ["name", "namespace", "node"],
    true,
    "Rate at which the guest dirties memory during its migration, in bytes per second.",
  ),
  m(
    "kubevirt_vmi_migration_memory_transfer_rate_bytes",
    "gauge",
    "virt-handler",
    ["name", "namespace", "node"],
    true,
    "Rate at which guest memory is transferred during its migration, in bytes per second.",
  ),
  m(
    "kubevirt_vmi_migration_progress_ratio",
    "gauge",
    "virt-handler",
    ["name", "namespace", "node"],
    false,
    "Progress of the running migration from 0 to 1 (processed / (processed + remaining)).",
  ),
  m(
    "kubevirt_vmi_migration_expected_completion_seconds",
    "gauge",
    "virt-handler",
    ["name", "namespace", "node"],
    false,
    "Expected seconds until the running migration completes at the current rates.",
  ),
  m(
    "kubevirt_vmi_migration_iterations",
    "gauge",
    "virt-handler",
    ["name", "namespace", "node"],
    false,
    "Pre-copy iterations done by the running migration.",
  ),
  m(
    "kubevirt_vmi_migration_autoconverge_throttle_ratio",
    "gauge",
    "virt-handler",
    ["name", "namespace", "node"],
    false,
    "vCPU throttle applied by auto-converge to the migrating guest, from 0 to 1.",
  ),
  m(
    "kubevirt_vmi_migration_downtime_seconds",
    "histogram",
    "virt-handler",
    ["node", "backend"],
    false,
    "Guest downtime of completed live migrations (paused on the source until running on the target).",
  ),
  m(
    "kubevirt_vmi_migration_last_downtime_seconds",
    "gauge",
    "virt-handler",
    ["name", "namespace", "node"],
    false,
    "Guest downtime of the last completed migration of a VMI out of this node, in seconds.",
  ),
  m(
    "kubevirt_vmi_migration_duration_seconds",
    "histogram",
    "virt-handler",
    ["node", "backend", "result"],
    false,
    "Total duration of live migrations from start to completion or failure.",
  ),
  m(
    "kubevirt_vmi_migration_failures_total",
    "counter",
    "virt-handler",
    ["node", "reason"],
    false,
    "Live migrations that failed on the source, by reason.",
  ),
  m(
    "kubevirt_vmi_migrations_succeeded_total",
    "counter",
    "virt-handler",
    ["name", "namespace", "node"],
    false,
    "Live migrations of a VMI that completed, counted by the source node's handler.",
  ),
];

/** The catalog entries `component` must export (its own, `all`, and `controllers` for the two controllers). */
export function metricsOf(component: "virt-api" | "virt-controller" | "virt-handler"): MetricSpec[] {
  return METRICS.filter(
    (m) =>
      m.component === component || m.component === "all" || (m.component === "controllers" && component !== "virt-api"),
  );
}

/**
 * The catalog metrics of `component` absent from its `/metrics` text, or served with another type or other labels
 * (each as `name: problem`); empty when the component exports its whole contract.
 */
export function catalogMismatches(component: "virt-api" | "virt-controller" | "virt-handler", text: string): string[] {
  const problems: string[] = [];
  for (const spec of metricsOf(component)) {
    const type = new RegExp(`^# TYPE ${spec.name} (\\w+)$`, "m").exec(text)?.[1];
    if (!type) {
      problems.push(`${spec.name}: not exported`);
      continue;
    }
    if (type !== spec.type) problems.push(`${spec.name}: type ${type}, expected ${spec.type}`);
    const sample = new RegExp(`^${spec.name}(?:_bucket|_count)?\\{([^}]*)\\}`, "m").exec(text)?.[1];
    if (sample === undefined) continue;
    const labels = [...sample.matchAll(/(\w+)="/g)].map((l) => l[1]).filter((l) => l !== "le");
    const expected = [...spec.labels].sort().join(",");
    if (labels.sort().join(",") !== expected)
      problems.push(`${spec.name}: labels ${labels.join(",")}, expected ${expected}`);
  }
  return problems;
}

/** The metric names a PromQL expression mentions (series names as written, e.g. `..._bucket`). */
export function metricNamesIn(expr: string): string[] {
  const names = new Set<string>();
  for (const match of expr.matchAll(/\b([a-z]+:[a-z0-9_:]+|kubevirt_[a-z0-9_]+|up)\b/g)) names.add(match[1]);
  return [...names];
}

/** The catalog entry a series name belongs to (`x_bucket`/`x_sum`/`x_count` of a histogram `x`), if any. */
export function familyOf(series: string): MetricSpec | undefined {
  const exact = METRICS.find((m) => m.name === series);
  if (exact) return exact;
  const base = series.replace(/_(bucket|sum|count)$/, "");
  return METRICS.find((m) => m.name === base && m.type === "histogram");
}

/** Whether `series` is exported by a component, is Prometheus' `up`, or is one of `recordingRules`. */
export function isKnownMetric(series: string, recordingRules: readonly string[] = []): boolean {
  return series === "up" || recordingRules.includes(series) || familyOf(series) !== undefined;
}
