/**
 * Monitoring objects, as KubeVirt ships them: a prometheus-operator ServiceMonitor over the components' metrics
 * Services, a PrometheusRule with the project's rules (tools/monitoring/rules), and the Grafana dashboards
 * (tools/monitoring's DASHBOARDS) as ConfigMaps with the Grafana sidecar's `grafana_dashboard: "1"` label.
 */
import { readFileSync } from "node:fs";
import { DASHBOARDS, RULES_FILE, renderDashboard } from "@kvt/monitoring";
import { parse } from "yaml";
import { commonLabels, type KubeObject } from "./objects.ts";

/** Where KubeVirt publishes the runbook of each of its alerts (kubevirt/monitoring's docs/runbooks). */
export const KUBEVIRT_RUNBOOKS = "https://kubevirt.io/monitoring/runbooks/";

/**
 * The alerts that are KubeVirt's own (same name, same meaning): their runbook is KubeVirt's published one. The
 * others are this project's; their runbooks exist only in tools/monitoring/runbooks.md, which is not published, so
 * they ship without a runbook_url rather than with a repository path.
 */
export const KUBEVIRT_ALERTS: ReadonlySet<string> = new Set([
  "VirtControllerDown",
  "NoLeadingVirtController",
  "VirtHandlerDown",
  "VirtAPIDown",
  "LowKVMNodesCount",
  "KubeVirtVMIExcessiveMigrations",
]);

interface RuleGroup {
  name: string;
  rules: { alert?: string; annotations?: Record<string, string> }[];
}

/** The rule groups of tools/monitoring with runbook URLs that point at published pages. */
export function ruleGroups(): RuleGroup[] {
  const groups = (parse(readFileSync(RULES_FILE, "utf8")) as { groups: RuleGroup[] }).groups;
  for (const g of groups) {
    for (const r of g.rules) {
      if (!r.alert || !r.annotations?.runbook_url) continue;
      if (KUBEVIRT_ALERTS.has(r.alert)) r.annotations.runbook_url = `${KUBEVIRT_RUNBOOKS}${r.alert}`;
      else delete r.annotations.runbook_url;
    }
  }
  return groups;
}

const MONITORING_LABELS = { "prometheus.kubevirt.io": "true", "k8s-app": "kubevirt" };

/** ServiceMonitor `kubevirt`: every `<component>-metrics` Service; the job label is the component's name. */
export function serviceMonitor(namespace: string, version: string): KubeObject {
  return {
    apiVersion: "monitoring.coreos.com/v1",
    kind: "ServiceMonitor",
    metadata: { name: "kubevirt", namespace, labels: { ...commonLabels(undefined, version), ...MONITORING_LABELS } },
    spec: {
      // tools/monitoring's rules select job="virt-api" | "virt-controller" | "virt-handler".
      jobLabel: "kubevirt.io",
      selector: { matchLabels: { "prometheus.kubevirt.io": "true" } },
      namespaceSelector: { matchNames: [namespace] },
      // The components serve /metrics over plain HTTP on the pod IP (--metrics-host=$(POD_IP)): read-only, no guest
      // data (libs/observability metrics-server.ts says why no credentials are needed).
      endpoints: [{ port: "metrics", path: "/metrics", scheme: "http", interval: "30s", honorLabels: true }],
    },
  };
}

/** PrometheusRule `prometheus-kubevirt-rules` (KubeVirt's name). */
export function prometheusRule(namespace: string, version: string): KubeObject {
  return {
    apiVersion: "monitoring.coreos.com/v1",
    kind: "PrometheusRule",
    metadata: {
      name: "prometheus-kubevirt-rules",
      namespace,
      labels: { ...commonLabels(undefined, version), ...MONITORING_LABELS },
    },
    spec: { groups: ruleGroups() },
  };
}

/** One ConfigMap per dashboard (`kubevirt-dashboard-<file stem>`), the JSON exactly as tools/monitoring renders it. */
export function dashboardConfigMaps(namespace: string, version: string): KubeObject[] {
  return Object.entries(DASHBOARDS).map(([file, d]) => ({
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: {
      name: `kubevirt-dashboard-${file.replace(/\.json$/, "")}`,
      namespace,
      labels: { ...commonLabels(undefined, version), grafana_dashboard: "1" },
    },
    data: { [file]: `${JSON.stringify(renderDashboard(d), null, 2)}\n` },
  }));
}
