/**
 * The roles KubeVirt ships for users (not components): `kubevirt.io:view` and `kubevirt.io:edit`, aggregated into the
 * built-in view, edit and admin roles, `kubevirt.io:default` and `instancetype.kubevirt.io:view`.
 */
import { SUBRESOURCE_GROUP, SUBRESOURCE_NAMES } from "@kvt/virt-api/lib";
import { commonLabels, type KubeObject } from "./objects.ts";

const KV = "kubevirt.io";

/**
 * `get` for the streaming and read-only subresources, `update` (PUT) for the actions; the subresources themselves
 * are virt-api's own list ({@link SUBRESOURCE_NAMES}), so a new one is granted as soon as virt-api serves it.
 */
const READ_ONLY_SUBRESOURCES = new Set([
  "virtualmachineinstances/console",
  "virtualmachineinstances/guestosinfo",
  "virtualmachineinstances/portforward",
  "virtualmachines/expand-spec",
  "virtualmachines/portforward",
]);
const INSTANCETYPE_GROUP = "instancetype.kubevirt.io";
const INSTANCETYPES = [
  "virtualmachineinstancetypes",
  "virtualmachineclusterinstancetypes",
  "virtualmachinepreferences",
  "virtualmachineclusterpreferences",
];
const WORKLOADS = [
  "virtualmachines",
  "virtualmachineinstances",
  "virtualmachineinstancemigrations",
  "virtualmachineinstancereplicasets",
  "virtualmachineinstancepresets",
];
const POOL = "pool.kubevirt.io";

/**
 * What users get, as KubeVirt ships it: `kubevirt.io:view` and `kubevirt.io:edit` aggregate into the built-in
 * view/edit roles (and, through edit's own aggregation label, into admin), so a namespace's editors can run VMs and
 * call the subresources; `kubevirt.io:default` lets every authenticated user read virt-api's version.
 */
export function userRoles(version: string): KubeObject[] {
  const labels = commonLabels(undefined, version);
  const sub = SUBRESOURCE_GROUP;
  return [
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: {
        name: "kubevirt.io:view",
        labels: { ...labels, "rbac.authorization.k8s.io/aggregate-to-view": "true" },
      },
      rules: [
        { apiGroups: [KV], resources: [...WORKLOADS], verbs: ["get", "list", "watch"] },
        { apiGroups: [POOL], resources: ["virtualmachinepools"], verbs: ["get", "list", "watch"] },
        { apiGroups: [INSTANCETYPE_GROUP], resources: [...INSTANCETYPES], verbs: ["get", "list", "watch"] },
        {
          apiGroups: [sub],
          resources: ["virtualmachines/expand-spec", "virtualmachineinstances/guestosinfo"],
          verbs: ["get"],
        },
        { apiGroups: [sub], resources: ["expand-vm-spec"], verbs: ["update"] },
      ],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: {
        name: "kubevirt.io:edit",
        labels: { ...labels, "rbac.authorization.k8s.io/aggregate-to-edit": "true" },
      },
      rules: [
        {
          apiGroups: [KV],
          resources: [...WORKLOADS],
          verbs: ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"],
        },
        {
          apiGroups: [POOL],
          resources: ["virtualmachinepools"],
          verbs: ["get", "delete", "create", "update", "patch", "list", "watch"],
        },
        {
          apiGroups: [INSTANCETYPE_GROUP],
          resources: [...INSTANCETYPES],
          verbs: ["get", "delete", "create", "update", "patch", "list", "watch"],
        },
        { apiGroups: [sub], resources: SUBRESOURCE_NAMES.filter((s) => READ_ONLY_SUBRESOURCES.has(s)), verbs: ["get"] },
        {
          apiGroups: [sub],
          resources: SUBRESOURCE_NAMES.filter((s) => !READ_ONLY_SUBRESOURCES.has(s)),
          verbs: ["update"],
        },
      ],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: "kubevirt.io:default", labels },
      rules: [{ apiGroups: [sub], resources: ["version"], verbs: ["get"] }],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: "kubevirt.io:default", labels },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "kubevirt.io:default" },
      subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "Group", name: "system:authenticated" }],
    },
    // Every authenticated user may read the cluster-wide instancetypes and preferences (KubeVirt's
    // instancetype.kubevirt.io:view), so anyone who may create a VM can pick one.
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: "instancetype.kubevirt.io:view", labels },
      rules: [
        {
          apiGroups: [INSTANCETYPE_GROUP],
          resources: ["virtualmachineclusterinstancetypes", "virtualmachineclusterpreferences"],
          verbs: ["get", "list", "watch"],
        },
      ],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: {
        name: "instancetype.kubevirt.io:view",
        labels,
        annotations: { "rbac.authorization.kubernetes.io/autoupdate": "true" },
      },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "instancetype.kubevirt.io:view" },
      subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "Group", name: "system:authenticated" }],
    },
  ];
}
