/**
 * Every release object, grouped into the files of deploy/ (pure). A {@link Manifest} is an object plus the YAML
 * comments the renderer writes beside it: the reason for each RBAC rule, privilege and placeholder.
 *
 * ```
 * deploy/kustomization.yaml        core: namespace, CRDs, priority class, per component RBAC + workloads, webhooks,
 *                                  APIServices, dashboards (`kubectl apply -k deploy/`)
 * deploy/monitoring/               prometheus-operator kinds: ServiceMonitor, PrometheusRule (`kubectl apply -k`)
 * deploy/kubevirt-cr/              the KubeVirt custom resource (after the CRDs are established)
 * deploy/release/*.yaml            each set rendered as a single file
 * ```
 */
import { customResourceDefinitions } from "@kvt/api";
import { virtApiManifests } from "@kvt/virt-api/lib";
import pkg from "../../../package.json" with { type: "json" };
import { dashboardConfigMaps, prometheusRule, serviceMonitor } from "./monitoring.ts";
import { COMPONENTS, type Component, commonLabels, type KubeObject, NAMESPACE } from "./objects.ts";
import { RULES, rbacObjects } from "./rbac.ts";
import { userRoles } from "./user-roles.ts";
import { priorityClass, workloadObjects } from "./workloads.ts";

/** The release version: the workspace's package version (images are tagged with it). */
export const VERSION: string = pkg.version;

/** A YAML path inside an object (keys and sequence indexes). */
export type YamlPath = readonly (string | number)[];

/** One object and its comments. */
export interface Manifest {
  readonly object: KubeObject;
  /** Written above the document. */
  readonly comment?: string;
  /** Written above the node at each path. */
  readonly notes?: readonly { readonly path: YamlPath; readonly comment: string }[];
}

/** One file of deploy/ (path relative to deploy/) and its objects. */
export interface ManifestFile {
  readonly path: string;
  readonly comment: string;
  readonly manifests: readonly Manifest[];
}

const CA_BUNDLE_NOTE =
  "caBundle is left out on purpose: virt-controller's certificate manager sets it to the KubeVirt CA bundle " +
  "(ConfigMap kubevirt-ca), as KubeVirt's virt-operator injects it, and renews it when the CA rotates; applying " +
  "this file again leaves it alone.";

function rbacManifests(component: Component, namespace: string, version: string): Manifest[] {
  const r = RULES[component];
  return rbacObjects(component, namespace, version).map((object) => {
    if (object.kind !== "ClusterRole" && object.kind !== "Role") return { object };
    const rules = object.kind === "ClusterRole" ? r.cluster : r.namespaced;
    return { object, notes: rules.map((rule, i) => ({ path: ["rules", i], comment: rule.why })) };
  });
}

/** Why the probes use plain HTTP on the metrics port. */
const PROBE_NOTE =
  "Probes and scrapes reach the metrics port on the pod IP (--metrics-host=$(POD_IP)) over plain HTTP: it is " +
  "read-only and carries no guest data; everything that changes or reveals a VM is behind TLS and a client identity.";

function workloadManifests(component: Component, namespace: string, version: string): Manifest[] {
  const pod = ["spec", "template", "spec"];
  const probeNote = { path: [...pod, "containers", 0, "readinessProbe"], comment: PROBE_NOTE };
  return workloadObjects(component, namespace, version).map((object) => {
    if (object.kind === "Deployment" && component === "virt-controller") return { object, notes: [probeNote] };
    if (object.kind !== "DaemonSet") return { object };
    return {
      object,
      comment: "virt-handler: one per node; every privilege and host path below says why it is needed.",
      notes: [
        probeNote,
        {
          path: [...pod, "hostPID"],
          comment:
            "hostPID: --wire-pod-network plumbs each launcher pod's network as KubeVirt's handler does: it finds the " +
            "launcher's process (pod uid in /proc/<pid>/cgroup, its socket under /proc/<pid>/root) and enters " +
            "/proc/<pid>/ns/net; the launcher (user 107, no capabilities) only opens the tap and serves DHCP. " +
            "--clear-migrated-flows (beyond KubeVirt) enters the node's namespace (its parent's, the runtime's shim) " +
            "and deletes the conntrack entries of flows to the pod address a VMI left in a live migration.",
        },
        {
          path: [...pod, "containers", 0, "securityContext"],
          comment:
            "privileged: the device plugins (devices.kubevirt.io/kvm, tun, vhost-net) follow the host's /dev/kvm, " +
            "/dev/net/tun and /dev/vhost-net, which only a privileged container sees (KubeVirt's handler is " +
            "privileged too). runAsUser 0: the launchers' sockets belong to their users; root may connect to " +
            "each. seccomp and capabilities do not apply to a privileged container. The root stays read-only.",
        },
        {
          path: [...pod, "volumes", 1],
          comment:
            "hostPath /var/lib/kubelet/pods, read-only at /pods: each launcher's socket is in its pod's sockets " +
            "emptyDir there (<pod uid>/volumes/kubernetes.io~empty-dir/sockets/launcher-sock; --kubelet-pods-dir " +
            "/pods, short as KubeVirt's kubelet-pods-shortened: a unix socket path ends at 107 bytes). No " +
            "hostNetwork: virt-api calls the pod IP, launchers are reached through their sockets.",
        },
        {
          path: [...pod, "volumes", 2],
          comment:
            "hostPath /var/lib/kubelet/device-plugins: the kubelet's kubelet.sock, where the device plugins " +
            "register, and the plugins' sockets, which the kubelet dials (--device-plugins-dir); only this " +
            "directory of the kubelet's root.",
        },
      ],
    };
  });
}

function virtApiWiring(namespace: string, version: string): Manifest[] {
  return virtApiManifests({ namespace }).map((o) => {
    const object = o as KubeObject;
    object.metadata.labels = { ...commonLabels("virt-api", version), ...object.metadata.labels };
    return { object, comment: CA_BUNDLE_NOTE };
  });
}

/** The core files (`kubectl apply -k deploy/`). */
export function coreFiles(namespace = NAMESPACE, version = VERSION): ManifestFile[] {
  const files: ManifestFile[] = [
    {
      path: "namespace.yaml",
      comment: "The install namespace.",
      manifests: [
        {
          object: {
            apiVersion: "v1",
            kind: "Namespace",
            metadata: {
              name: namespace,
              labels: { ...commonLabels(undefined, version), "pod-security.kubernetes.io/enforce": "privileged" },
            },
          },
          notes: [
            {
              path: ["metadata", "labels", "pod-security.kubernetes.io/enforce"],
              comment:
                "Pod Security admission: virt-handler is privileged (see its DaemonSet), which only the privileged " +
                "level admits (KubeVirt labels its namespace the same way); virt-api's and virt-controller's pods meet " +
                "the restricted level on their own.",
            },
          ],
        },
      ],
    },
    ...customResourceDefinitions().map((crd) => ({
      path: `crds/${crd.metadata.name}.yaml`,
      comment: "From @kvt/api customResourceDefinitions() (libs/api/src/schema).",
      manifests: [{ object: crd as unknown as KubeObject }],
    })),
    {
      path: "priority-class.yaml",
      comment: "KubeVirt's priority class for virt-api, virt-controller and virt-handler.",
      manifests: [{ object: priorityClass(version) }],
    },
  ];
  for (const c of COMPONENTS) {
    files.push({
      path: `${c}/rbac.yaml`,
      comment: `${c}: ServiceAccount and least-privilege RBAC; each rule names the code path that needs it.`,
      manifests: rbacManifests(c, namespace, version),
    });
    files.push({
      path: `${c}/workload.yaml`,
      comment: `${c}: workload, Services${c === "virt-handler" ? "" : " and PodDisruptionBudget"}.`,
      manifests: workloadManifests(c, namespace, version),
    });
  }
  files.push({
    path: "user-roles.yaml",
    comment:
      "Roles for users (not components): kubevirt.io:view and kubevirt.io:edit aggregate into the built-in view, " +
      "edit and admin roles; kubevirt.io:default lets authenticated users read virt-api's version.",
    manifests: userRoles(version).map((object) => ({ object })),
  });
  files.push({
    path: "virt-api/webhooks.yaml",
    comment: "Admission webhooks and the subresources.kubevirt.io APIServices (@kvt/virt-api manifests.ts).",
    manifests: virtApiWiring(namespace, version),
  });
  files.push({
    path: "dashboards.yaml",
    comment: 'Grafana dashboards (tools/monitoring) for the Grafana sidecar (label grafana_dashboard: "1").',
    manifests: dashboardConfigMaps(namespace, version).map((object) => ({ object })),
  });
  return files;
}

/** The prometheus-operator files (`kubectl apply -k deploy/monitoring/`; needs the operator's CRDs). */
export function monitoringFiles(namespace = NAMESPACE, version = VERSION): ManifestFile[] {
  return [
    {
      path: "monitoring/service-monitor.yaml",
      comment: "Scrapes the <component>-metrics Services; the job label is the component (kubevirt.io label).",
      manifests: [{ object: serviceMonitor(namespace, version) }],
    },
    {
      path: "monitoring/prometheus-rule.yaml",
      comment:
        "tools/monitoring/rules/kubevirt-ts.rules.yaml; runbook_url: KubeVirt's published runbook for KubeVirt's " +
        "alerts, none for this project's own (their runbooks are not published yet).",
      manifests: [{ object: prometheusRule(namespace, version) }],
    },
  ];
}

/**
 * The KubeVirt custom resource, KubeVirt's kubevirt-cr.yaml (`kubectl apply -k deploy/kubevirt-cr/`): applied after
 * the core set, once its CRD is established (an API server refuses a kind whose CRD it does not serve yet).
 */
export function customResourceFiles(namespace = NAMESPACE, version = VERSION): ManifestFile[] {
  return [
    {
      path: "kubevirt-cr/kubevirt.yaml",
      comment:
        "The configuration object every component reads (spec.configuration). On nodes without /dev/kvm set " +
        "spec.configuration.developerConfiguration.useEmulation: true (guests then run on QEMU TCG).",
      manifests: [
        {
          object: {
            apiVersion: "kubevirt.io/v1",
            kind: "KubeVirt",
            metadata: { name: "kubevirt", namespace, labels: commonLabels(undefined, version) },
            spec: {
              imagePullPolicy: "IfNotPresent",
              configuration: { developerConfiguration: { featureGates: [] } },
            },
          },
        },
      ],
    },
  ];
}

/** Every object of the release, core first. */
export function allObjects(): KubeObject[] {
  return [...coreFiles(), ...monitoringFiles(), ...customResourceFiles()].flatMap((f) =>
    f.manifests.map((m) => m.object),
  );
}
