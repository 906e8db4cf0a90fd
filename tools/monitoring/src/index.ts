/** @kvt/monitoring: the metric catalog, the Grafana dashboards and the Prometheus rules' location. */

/** Every exported metric, and helpers to check PromQL against it. */
export {
  type Component,
  catalogMismatches,
  familyOf,
  isKnownMetric,
  METRICS,
  type MetricSpec,
  metricNamesIn,
  metricsOf,
} from "./catalog.ts";
/** The dashboards as data, their Grafana JSON, and every panel query. */
export { allQueries, DASHBOARDS, type Dashboard, type Panel, renderDashboard, type Target } from "./dashboards.ts";

/** Absolute path of the Prometheus rules file. */
export const RULES_FILE: string = new URL("../rules/kubevirt-ts.rules.yaml", import.meta.url).pathname;
/** Prometheus's promtool for the tests that check rules (installed from Debian when missing, as root). */
export { ensurePromtool } from "./promtool.ts";
