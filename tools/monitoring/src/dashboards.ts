/**
 * The Grafana dashboards, built in code so that every panel's query can be checked against the metric catalog
 * (dashboards.test.ts) and by the e2e test against a real Prometheus. `npm run gen -w @kvt/monitoring` writes them
 * to tools/monitoring/dashboards/*.json; a test fails when the files are stale. The Prometheus datasource is the
 * dashboard variable `datasource`.
 */

/** One query of a panel. */
export interface Target {
  readonly expr: string;
  readonly legendFormat: string;
}

/** One panel. */
export interface Panel {
  readonly title: string;
  readonly unit: string;
  readonly targets: readonly Target[];
  readonly kind?: "timeseries" | "stat";
  readonly description?: string;
}

/** One dashboard. */
export interface Dashboard {
  readonly uid: string;
  readonly title: string;
  readonly description: string;
  readonly rows: readonly { readonly title: string; readonly panels: readonly Panel[] }[];
}

const t = (expr: string, legendFormat = ""): Target => ({ expr, legendFormat });
const q = (quantile: number, bucket: string, window: string, by = ""): string =>
  `histogram_quantile(${quantile}, sum by (le${by ? `, ${by}` : ""}) (rate(${bucket}[${window}])))`;

/** Control plane: API access, work queues, leadership and readiness. */
export const CONTROL_PLANE: Dashboard = {
  uid: "kubevirt-ts-control-plane",
  title: "KubeVirt / Control Plane",
  description: "virt-api, virt-controller and virt-handler: health, leadership, API access and work queues.",
  rows: [
    {
      title: "Health",
      panels: [
        {
          title: "Components up",
          unit: "short",
          kind: "stat",
          targets: [t('sum by (job) (up{job=~"virt-.*"})', "{{job}}")],
        },
        {
          title: "Leading virt-controller",
          unit: "short",
          kind: "stat",
          targets: [t("sum(kubevirt_virt_controller_leading_status)", "leaders")],
        },
        {
          title: "Readiness",
          unit: "short",
          targets: [
            t("sum(kubevirt_virt_controller_ready_status)", "virt-controller"),
            t("sum(kubevirt_virt_handler_ready_status)", "virt-handler"),
            t("sum(kubevirt_virt_api_ready_status)", "virt-api"),
          ],
        },
      ],
    },
    {
      title: "API access",
      panels: [
        {
          title: "API requests by code",
          unit: "reqps",
          targets: [t("sum by (job, code) (rate(kubevirt_rest_client_requests_total[5m]))", "{{job}} {{code}}")],
        },
        {
          title: "API requests by verb and resource",
          unit: "reqps",
          targets: [
            t("sum by (verb, resource) (rate(kubevirt_rest_client_requests_total[5m]))", "{{verb}} {{resource}}"),
          ],
        },
        {
          title: "API latency p99 by verb",
          unit: "s",
          targets: [t(q(0.99, "kubevirt_rest_client_request_latency_seconds_bucket", "5m", "verb"), "{{verb}}")],
        },
        {
          title: "virt-api requests by handler",
          unit: "reqps",
          targets: [t("sum by (handler, code) (rate(kubevirt_virt_api_requests_total[5m]))", "{{handler}} {{code}}")],
        },
      ],
    },
    {
      title: "Work queues",
      panels: [
        {
          title: "Adds",
          unit: "ops",
          targets: [t("sum by (name) (rate(kubevirt_workqueue_adds_total[5m]))", "{{name}}")],
        },
        { title: "Depth", unit: "short", targets: [t("sum by (name) (kubevirt_workqueue_depth)", "{{name}}")] },
        {
          title: "Queue duration p95",
          unit: "s",
          targets: [t(q(0.95, "kubevirt_workqueue_queue_duration_seconds_bucket", "5m", "name"), "{{name}}")],
        },
        {
          title: "Work duration p95",
          unit: "s",
          targets: [t(q(0.95, "kubevirt_workqueue_work_duration_seconds_bucket", "5m", "name"), "{{name}}")],
        },
        {
          title: "Retries",
          unit: "ops",
          targets: [t("sum by (name) (rate(kubevirt_workqueue_retries_total[5m]))", "{{name}}")],
        },
      ],
    },
  ],
};

/** Virtual machines: phases, start latency, per-VM CPU and memory. */
export const VIRTUAL_MACHINES: Dashboard = {
  uid: "kubevirt-ts-virtual-machines",
  title: "KubeVirt / Virtual Machines",
  description: "VMI phases, start latency percentiles, and per-VM CPU and memory.",
  rows: [
    {
      title: "Fleet",
      panels: [
        {
          title: "VMIs by phase",
          unit: "short",
          targets: [t("sum by (phase) (kubevirt_vmi_phase_count)", "{{phase}}")],
        },
        {
          title: "VMIs by node",
          unit: "short",
          targets: [t('sum by (node) (kubevirt_vmi_phase_count{phase="running"})', "{{node}}")],
        },
        {
          title: "Start latency (creation to Running)",
          unit: "s",
          targets: [
            t(q(0.5, 'kubevirt_vmi_phase_transition_time_from_creation_seconds_bucket{phase="Running"}', "30m"), "p50"),
            t(
              q(0.95, 'kubevirt_vmi_phase_transition_time_from_creation_seconds_bucket{phase="Running"}', "30m"),
              "p95",
            ),
          ],
        },
      ],
    },
    {
      title: "Per VM",
      panels: [
        {
          title: "vCPU usage",
          unit: "percentunit",
          targets: [
            t("sum by (namespace, name) (rate(kubevirt_vmi_vcpu_seconds_total[5m]))", "{{namespace}}/{{name}}"),
          ],
        },
        {
          title: "Guest memory",
          unit: "bytes",
          targets: [t("kubevirt_vmi_memory_domain_bytes", "{{namespace}}/{{name}}")],
        },
        {
          title: "Resident memory on the host",
          unit: "bytes",
          targets: [t("kubevirt_vmi_memory_resident_bytes", "{{namespace}}/{{name}}")],
        },
      ],
    },
  ],
};

/** Live migrations: in flight, duration and downtime, throughput, dirty rate, remaining bytes, failures. */
export const LIVE_MIGRATIONS: Dashboard = {
  uid: "kubevirt-ts-live-migrations",
  title: "KubeVirt / Live Migrations",
  description:
    "Migrations in flight by phase, duration and downtime percentiles, throughput vs dirty rate, remaining bytes, failures by reason.",
  rows: [
    {
      title: "Overview",
      panels: [
        {
          title: "In flight by phase",
          unit: "short",
          targets: [
            t("kubevirt_vmi_migrations_in_pending_phase", "Pending"),
            t("kubevirt_vmi_migrations_in_scheduling_phase", "Scheduling"),
            t("kubevirt_vmi_migrations_in_running_phase", "Running"),
          ],
        },
        {
          title: "Outcomes (1h)",
          unit: "short",
          kind: "stat",
          targets: [
            t("sum(increase(kubevirt_vmi_migration_succeeded[1h]))", "succeeded"),
            t("sum(increase(kubevirt_vmi_migration_failed[1h]))", "failed"),
          ],
        },
        {
          title: "Failures by reason (1h)",
          unit: "short",
          targets: [t("sum by (reason) (increase(kubevirt_vmi_migration_failed[1h]))", "{{reason}}")],
        },
      ],
    },
    {
      title: "Duration and downtime",
      panels: [
        {
          title: "Migration duration",
          unit: "s",
          targets: [
            t(q(0.5, "kubevirt_vmi_migration_duration_seconds_bucket", "1h"), "p50"),
            t(q(0.95, "kubevirt_vmi_migration_duration_seconds_bucket", "1h"), "p95"),
          ],
        },
        {
          title: "Guest downtime",
          unit: "s",
          description: "Guest paused on the source until running on the target.",
          targets: [
            t(q(0.5, "kubevirt_vmi_migration_downtime_seconds_bucket", "1h"), "p50"),
            t(q(0.95, "kubevirt_vmi_migration_downtime_seconds_bucket", "1h"), "p95"),
            t(q(0.99, "kubevirt_vmi_migration_downtime_seconds_bucket", "1h"), "p99"),
          ],
        },
        {
          title: "Phase latency from creation p95",
          unit: "s",
          targets: [
            t(
              q(0.95, "kubevirt_vmi_migration_phase_transition_time_from_creation_seconds_bucket", "1h", "phase"),
              "{{phase}}",
            ),
          ],
        },
      ],
    },
    {
      title: "Per migration",
      panels: [
        {
          title: "Transfer rate vs dirty rate",
          unit: "Bps",
          targets: [
            t("kubevirt_vmi_migration_memory_transfer_rate_bytes", "transfer {{namespace}}/{{name}}"),
            t("kubevirt_vmi_migration_dirty_memory_rate_bytes", "dirty {{namespace}}/{{name}}"),
          ],
        },
        {
          title: "Remaining bytes",
          unit: "bytes",
          targets: [t("kubevirt_vmi_migration_data_remaining_bytes", "{{namespace}}/{{name}}")],
        },
        {
          title: "Processed bytes",
          unit: "bytes",
          targets: [t("kubevirt_vmi_migration_data_processed_bytes", "{{namespace}}/{{name}}")],
        },
        {
          title: "Progress",
          unit: "percentunit",
          targets: [t("kubevirt_vmi_migration_progress_ratio", "{{namespace}}/{{name}}")],
        },
        {
          title: "Expected time to completion",
          unit: "s",
          targets: [t("kubevirt_vmi_migration_expected_completion_seconds", "{{namespace}}/{{name}}")],
        },
        {
          title: "Pre-copy iterations and auto-converge throttle",
          unit: "short",
          targets: [
            t("kubevirt_vmi_migration_iterations", "iterations {{namespace}}/{{name}}"),
            t("kubevirt_vmi_migration_autoconverge_throttle_ratio", "throttle {{namespace}}/{{name}}"),
          ],
        },
      ],
    },
  ],
};

/** Every dashboard, by file name. */
export const DASHBOARDS: Readonly<Record<string, Dashboard>> = {
  "control-plane.json": CONTROL_PLANE,
  "virtual-machines.json": VIRTUAL_MACHINES,
  "live-migrations.json": LIVE_MIGRATIONS,
};

/** The Grafana JSON model of `d` (schemaVersion 39, Prometheus datasource variable). */
export function renderDashboard(d: Dashboard): unknown {
  // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana variable syntax, not a JS template.
  const datasource = { type: "prometheus", uid: "${datasource}" };
  const panels: unknown[] = [];
  let id = 1;
  let y = 0;
  for (const row of d.rows) {
    panels.push({
      id: id++,
      type: "row",
      title: row.title,
      collapsed: false,
      gridPos: { h: 1, w: 24, x: 0, y },
      panels: [],
    });
    y += 1;
    row.panels.forEach((p, i) => {
      const w = 8;
      panels.push({
        id: id++,
        type: p.kind ?? "timeseries",
        title: p.title,
        description: p.description ?? "",
        datasource,
        gridPos: { h: 8, w, x: (i % 3) * w, y: y + Math.floor(i / 3) * 8 },
        fieldConfig: { defaults: { unit: p.unit }, overrides: [] },
        options: {},
        targets: p.targets.map((tg, j) => ({
          datasource,
          expr: tg.expr,
          legendFormat: tg.legendFormat,
          refId: String.fromCharCode(65 + j),
        })),
      });
    });
    y += Math.ceil(row.panels.length / 3) * 8;
  }
  return {
    uid: d.uid,
    title: d.title,
    description: d.description,
    tags: ["kubevirt", "kubevirt-ts"],
    schemaVersion: 39,
    version: 1,
    editable: true,
    time: { from: "now-1h", to: "now" },
    refresh: "30s",
    templating: {
      list: [
        { name: "datasource", label: "Prometheus", type: "datasource", query: "prometheus", current: {}, hide: 0 },
      ],
    },
    panels,
  };
}

/** Every query of every panel of every dashboard, with where it is. */
export function allQueries(): { dashboard: string; panel: string; expr: string }[] {
  return Object.entries(DASHBOARDS).flatMap(([file, d]) =>
    d.rows.flatMap((r) =>
      r.panels.flatMap((p) => p.targets.map((tg) => ({ dashboard: file, panel: p.title, expr: tg.expr }))),
    ),
  );
}
