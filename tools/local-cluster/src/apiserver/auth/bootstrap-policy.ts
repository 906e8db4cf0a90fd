/**
 * The RBAC objects kube-apiserver's bootstrap policy creates that the local cluster needs, ensured at every start
 * (created when missing; put back when changed while `rbac.authorization.kubernetes.io/autoupdate` is "true", as
 * kube-apiserver reconciles them):
 *
 *   cluster-admin                 -> Group system:masters
 *   system:discovery, system:basic-user, system:public-info-viewer -> Group system:authenticated
 *   system:service-account-issuer-discovery -> Group system:serviceaccounts
 *   admin, edit, view             (aggregated from system:aggregate-to-* and any role labelled aggregate-to-*)
 *   system:kube-scheduler         -> User system:kube-scheduler   (what tools/local-cluster/src/scheduler calls)
 *   system:node                   -> Group system:nodes            (what tools/local-cluster/src/kubelet calls)
 *   system:node-proxier           -> User system:kube-proxy        (what tools/local-cluster/src/proxy calls)
 *
 * Two differences from kube-apiserver, both narrower: system:kube-scheduler has no pod delete (this scheduler does
 * not preempt) nor leases (it does not elect a leader); kube-apiserver limits each kubelet to its own node's objects
 * with the Node authorizer, which this server does not have, so system:node is bound to the group system:nodes as
 * kube-apiserver did before 1.8 and holds only the calls the process-kubelet makes.
 */
import type { ResourceService } from "../rest/service.ts";
import { systemContext } from "../rest/service.ts";
import type { KubeObject } from "../types.ts";
import { jsonEqual } from "../types.ts";
import type { PolicyRule } from "./rbac.ts";

const RBAC_V1 = "rbac.authorization.k8s.io/v1";
const AUTOUPDATE = "rbac.authorization.kubernetes.io/autoupdate";
const BOOTSTRAP_LABELS = { "kubernetes.io/bootstrapping": "rbac-defaults" };
const READ = ["get", "list", "watch"];
const WRITE = ["create", "delete", "deletecollection", "patch", "update"];

const r = (apiGroups: string[], resources: string[], verbs: string[]): PolicyRule => ({ apiGroups, resources, verbs });
const url = (nonResourceURLs: string[], verbs: string[]): PolicyRule => ({ nonResourceURLs, verbs });

function clusterRole(name: string, rules: PolicyRule[], labels: Record<string, string> = {}): KubeObject {
  return {
    apiVersion: RBAC_V1,
    kind: "ClusterRole",
    metadata: { name, labels: { ...BOOTSTRAP_LABELS, ...labels }, annotations: { [AUTOUPDATE]: "true" } },
    rules,
  };
}

function aggregated(name: string, selectorLabel: string, labels: Record<string, string> = {}): KubeObject {
  return {
    ...clusterRole(name, [], labels),
    aggregationRule: { clusterRoleSelectors: [{ matchLabels: { [selectorLabel]: "true" } }] },
  };
}

function binding(name: string, role: string, subjects: { kind: string; name: string }[]): KubeObject {
  return {
    apiVersion: RBAC_V1,
    kind: "ClusterRoleBinding",
    metadata: { name, labels: { ...BOOTSTRAP_LABELS }, annotations: { [AUTOUPDATE]: "true" } },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: role },
    subjects: subjects.map((s) => ({ apiGroup: "rbac.authorization.k8s.io", ...s })),
  };
}

const group = (name: string): { kind: string; name: string } => ({ kind: "Group", name });
const AGG = "rbac.authorization.k8s.io/aggregate-to-";

/** The scheduler's calls: informers on pods, nodes, claims, volumes, classes; binding; status; claim annotation. */
const SCHEDULER_RULES: PolicyRule[] = [
  r([""], ["pods", "nodes", "persistentvolumeclaims", "persistentvolumes"], ["list", "watch"]),
  r(["storage.k8s.io"], ["storageclasses"], ["list", "watch"]),
  r([""], ["pods/binding", "bindings"], ["create"]),
  r([""], ["pods/status"], ["patch", "update"]),
  r([""], ["persistentvolumeclaims"], ["patch"]),
  r(["", "events.k8s.io"], ["events"], ["create", "patch", "update"]),
];

/** The process-kubelet's calls (kubelet.ts, node-agent.ts). */
const NODE_RULES: PolicyRule[] = [
  r([""], ["nodes"], ["create", "get"]),
  r([""], ["nodes/status"], ["patch", "update"]),
  r([""], ["pods"], ["list", "watch", "get", "delete"]),
  r([""], ["pods/status"], ["patch", "update"]),
  r([""], ["configmaps", "secrets", "persistentvolumeclaims", "persistentvolumes", "serviceaccounts"], ["get"]),
  r([""], ["serviceaccounts/token"], ["create"]),
  r(["", "events.k8s.io"], ["events"], ["create", "patch", "update"]),
];

/** kube-proxy's calls: Services and EndpointSlices (and nodes, events) as kube's system:node-proxier grants. */
const NODE_PROXIER_RULES: PolicyRule[] = [
  r([""], ["services", "endpoints"], ["list", "watch"]),
  r([""], ["nodes"], READ),
  r(["", "events.k8s.io"], ["events"], ["create", "patch", "update"]),
  r(["discovery.k8s.io"], ["endpointslices"], ["list", "watch"]),
];

const CORE_READ = [
  "pods",
  "pods/log",
  "pods/status",
  "services",
  "services/status",
  "endpoints",
  "configmaps",
  "persistentvolumeclaims",
  "persistentvolumeclaims/status",
  "serviceaccounts",
  "events",
  "limitranges",
  "resourcequotas",
  "namespaces",
  "namespaces/status",
  "replicationcontrollers",
];
const APPS = ["deployments", "replicasets", "statefulsets", "daemonsets", "controllerrevisions"];

/** Every bootstrap object, roles before bindings. */
export function bootstrapPolicy(): KubeObject[] {
  return [
    clusterRole("cluster-admin", [r(["*"], ["*"], ["*"]), url(["*"], ["*"])], { [`${AGG}admin`]: "false" }),
    clusterRole("system:discovery", [
      url(
        [
          "/api",
          "/api/*",
          "/apis",
          "/apis/*",
          "/healthz",
          "/livez",
          "/openapi",
          "/openapi/*",
          "/readyz",
          "/version",
          "/version/",
        ],
        ["get"],
      ),
    ]),
    clusterRole("system:basic-user", [
      r(["authorization.k8s.io"], ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], ["create"]),
      r(["authentication.k8s.io"], ["selfsubjectreviews"], ["create"]),
    ]),
    clusterRole("system:public-info-viewer", [
      url(["/healthz", "/livez", "/readyz", "/version", "/version/"], ["get"]),
    ]),
    clusterRole("system:service-account-issuer-discovery", [
      url(["/.well-known/openid-configuration", "/openid/v1/jwks"], ["get"]),
    ]),
    aggregated("admin", `${AGG}admin`),
    aggregated("edit", `${AGG}edit`, { [`${AGG}admin`]: "true" }),
    aggregated("view", `${AGG}view`, { [`${AGG}edit`]: "true" }),
    clusterRole(
      "system:aggregate-to-view",
      [
        r([""], CORE_READ, READ),
        r(["apps"], APPS, READ),
        r(["batch"], ["jobs", "cronjobs"], READ),
        r(["policy"], ["poddisruptionbudgets"], READ),
        r(["discovery.k8s.io"], ["endpointslices"], READ),
      ],
      { [`${AGG}view`]: "true" },
    ),
    clusterRole(
      "system:aggregate-to-edit",
      [
        r([""], ["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"], WRITE),
        r([""], ["configmaps", "events", "persistentvolumeclaims", "services", "secrets", "serviceaccounts"], WRITE),
        r([""], ["secrets"], READ),
        r([""], ["pods/eviction"], ["create"]),
        r([""], ["serviceaccounts"], ["impersonate"]),
        r([""], ["serviceaccounts/token"], ["create"]),
        r(
          ["apps"],
          APPS.filter((a) => a !== "controllerrevisions"),
          WRITE,
        ),
        r(["batch"], ["jobs", "cronjobs"], WRITE),
        r(["policy"], ["poddisruptionbudgets"], WRITE),
      ],
      { [`${AGG}edit`]: "true" },
    ),
    clusterRole(
      "system:aggregate-to-admin",
      [
        r(["rbac.authorization.k8s.io"], ["roles", "rolebindings"], [...READ, ...WRITE]),
        r(["authorization.k8s.io"], ["localsubjectaccessreviews"], ["create"]),
      ],
      { [`${AGG}admin`]: "true" },
    ),
    clusterRole("system:kube-scheduler", SCHEDULER_RULES),
    clusterRole("system:node", NODE_RULES),
    clusterRole("system:node-proxier", NODE_PROXIER_RULES),
    binding("cluster-admin", "cluster-admin", [group("system:masters")]),
    binding("system:discovery", "system:discovery", [group("system:authenticated")]),
    binding("system:basic-user", "system:basic-user", [group("system:authenticated")]),
    binding("system:public-info-viewer", "system:public-info-viewer", [
      group("system:authenticated"),
      group("system:unauthenticated"),
    ]),
    binding("system:service-account-issuer-discovery", "system:service-account-issuer-discovery", [
      group("system:serviceaccounts"),
    ]),
    binding("system:kube-scheduler", "system:kube-scheduler", [{ kind: "User", name: "system:kube-scheduler" }]),
    binding("system:node", "system:node", [group("system:nodes")]),
    binding("system:node-proxier", "system:node-proxier", [{ kind: "User", name: "system:kube-proxy" }]),
  ];
}

/** Creates the bootstrap objects that are missing and puts back those changed while their autoupdate is "true". */
export async function ensureBootstrapPolicy(service: ResourceService): Promise<void> {
  const ctx = systemContext();
  for (const want of bootstrapPolicy()) {
    const resource = want.kind === "ClusterRole" ? "clusterroles" : "clusterrolebindings";
    const def = service.registry.lookup("rbac.authorization.k8s.io", "v1", resource);
    if (!def) throw new Error(`the API server serves no rbac.authorization.k8s.io/v1 ${resource}`);
    const name = want.metadata.name as string;
    const have = service.store.get(`rbac.authorization.k8s.io/${resource}`, name)?.obj;
    if (!have) {
      await service.create(def, "v1", undefined, structuredClone(want), ctx);
      continue;
    }
    if (have.metadata.annotations?.[AUTOUPDATE] === "false") continue;
    // An aggregated role's rules are the aggregation controller's to write: compare its selectors only.
    const role = want.aggregationRule ? ["aggregationRule"] : ["rules", "aggregationRule"];
    const fields = want.kind === "ClusterRole" ? role : ["roleRef", "subjects"];
    if (fields.every((f) => jsonEqual(have[f], want[f]))) continue;
    const body = { ...structuredClone(have), ...Object.fromEntries(fields.map((f) => [f, structuredClone(want[f])])) };
    await service.update(def, "v1", undefined, name, body, ctx);
  }
}
