/**
 * The built-in resources the system and kubectl use (core v1, apps, coordination, events, RBAC, policy, scheduling,
 * apiextensions, admissionregistration, apiregistration), with their scopes, short names, columns, selectable
 * fields and strategies. Their schemas are permissive (x-kubernetes-preserve-unknown-fields below the top level).
 */
import { reviewAccess, reviewRules } from "../auth/access-review.ts";
import { type FieldGetter, pathGetter } from "../selectors/fields.ts";
import { AGE, BUILTIN_COLUMNS } from "../table/printers.ts";
import { storageClassName } from "../table/storage-printers.ts";
import type { KubeObject } from "../types.ts";
import { crdStrategy } from "./crd.ts";
import { configMapStrategy, secretStrategy } from "./data-size.ts";
import { defaultPod, podQosClass } from "./pod-defaults.ts";
import { decodeNodeQuantities, decodePodQuantities, validatePodQuantities } from "./pod-resources.ts";
import type { JSONSchemaProps } from "./schema.ts";
import { persistentVolumeClaimStrategy, persistentVolumeStrategy, storageClassStrategy } from "./storage.ts";
import type { ResourceDef, Strategy } from "./types.ts";

/** Verbs of an ordinary read-write resource. */
export const ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"] as const;

interface Spec {
  group: string;
  version: string;
  resource: string;
  kind: string;
  namespaced: boolean;
  shortNames?: string[];
  categories?: string[];
  subresources?: string[];
  fields?: string[];
  generation?: boolean;
  strategy?: Strategy;
  topLevel?: string[];
  verbs?: readonly string[];
  nameIsLabel?: boolean;
}

function permissiveSchema(topLevel: readonly string[]): JSONSchemaProps {
  const properties: Record<string, JSONSchemaProps> = {
    apiVersion: { type: "string" },
    kind: { type: "string" },
    metadata: { type: "object" },
  };
  for (const f of topLevel) properties[f] = { "x-kubernetes-preserve-unknown-fields": true };
  return { type: "object", properties };
}

const podStrategy: Strategy = {
  gracePeriod: (o: KubeObject) => {
    const spec = o.spec as { terminationGracePeriodSeconds?: number; nodeName?: string } | undefined;
    const phase = (o.status as { phase?: string } | undefined)?.phase;
    if (!spec?.nodeName || phase === "Succeeded" || phase === "Failed") return 0;
    return spec.terminationGracePeriodSeconds ?? 30;
  },
  prepareCreate: (o: KubeObject) => {
    decodePodQuantities(o);
    defaultPod(o);
    o.status = { phase: "Pending", qosClass: podQosClass(o) };
  },
  prepareUpdate: (o: KubeObject) => {
    decodePodQuantities(o);
    defaultPod(o);
  },
  validate: (o: KubeObject) => validatePodQuantities(o),
};

/**
 * A core/v1 Event as kube-apiserver serializes it: Go writes its zero-valued non-pointer fields, so an Event stored
 * without them reads back with `eventTime`, `firstTimestamp` and `lastTimestamp` null, `source` `{}` and
 * `reportingComponent`/`reportingInstance` "" (found by the scale bench comparing virt-controller's events).
 */
function eventZeroValues(o: KubeObject): void {
  const e = o as Record<string, unknown>;
  for (const f of ["eventTime", "firstTimestamp", "lastTimestamp"]) if (e[f] === undefined || e[f] === "") e[f] = null;
  e.source ??= {};
  e.reportingComponent ??= "";
  e.reportingInstance ??= "";
}
const coreEventStrategy: Strategy = { prepareCreate: eventZeroValues, prepareUpdate: eventZeroValues };

const namespaceStrategy: Strategy = {
  prepareCreate: (o: KubeObject) => {
    o.spec = { finalizers: ["kubernetes"] };
    o.status = { phase: "Active" };
    o.metadata.labels = { ...(o.metadata.labels ?? {}), "kubernetes.io/metadata.name": o.metadata.name ?? "" };
  },
  prepareUpdate: (o: KubeObject, old: KubeObject) => {
    o.spec = old.spec;
    o.metadata.labels = { ...(o.metadata.labels ?? {}), "kubernetes.io/metadata.name": o.metadata.name ?? "" };
  },
};

/** Authorization reviews: the local cluster has one administrator, so every authenticated request is allowed. */
const accessReview: Strategy = { review: reviewAccess };

const C = (resource: string, kind: string, namespaced: boolean, extra: Partial<Spec> = {}): Spec => ({
  group: "",
  version: "v1",
  resource,
  kind,
  namespaced,
  ...extra,
});
const G = (
  group: string,
  version: string,
  resource: string,
  kind: string,
  namespaced: boolean,
  extra: Partial<Spec> = {},
): Spec => ({
  group,
  version,
  resource,
  kind,
  namespaced,
  ...extra,
});

const SPECS: Spec[] = [
  C("namespaces", "Namespace", false, {
    shortNames: ["ns"],
    subresources: ["status", "finalize"],
    fields: ["status.phase"],
    strategy: namespaceStrategy,
    nameIsLabel: true,
  }),
  C("pods", "Pod", true, {
    shortNames: ["po"],
    categories: ["all"],
    subresources: ["status", "binding", "eviction", "log"],
    fields: [
      "spec.nodeName",
      "spec.restartPolicy",
      "spec.schedulerName",
      "spec.serviceAccountName",
      "spec.hostNetwork",
      "status.phase",
      "status.podIP",
      "status.nominatedNodeName",
    ],
    strategy: podStrategy,
  }),
  // A Node keeps the status it is created with (a kubelet, or kwok's nodes, register with their capacity).
  C("nodes", "Node", false, {
    shortNames: ["no"],
    subresources: ["status"],
    fields: ["spec.unschedulable"],
    strategy: { statusOnCreate: true, decode: decodeNodeQuantities },
  }),
  C("services", "Service", true, { shortNames: ["svc"], categories: ["all"], subresources: ["status"] }),
  C("endpoints", "Endpoints", true, { shortNames: ["ep"], topLevel: ["subsets"] }),
  // Kept by the EndpointSlice controller (controllers/endpointslice.ts) for Services with a selector.
  G("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", true, {
    topLevel: ["addressType", "endpoints", "ports"],
  }),
  C("configmaps", "ConfigMap", true, {
    shortNames: ["cm"],
    topLevel: ["data", "binaryData", "immutable"],
    strategy: configMapStrategy,
  }),
  C("secrets", "Secret", true, {
    fields: ["type"],
    topLevel: ["data", "stringData", "type", "immutable"],
    strategy: secretStrategy,
  }),
  C("serviceaccounts", "ServiceAccount", true, {
    shortNames: ["sa"],
    subresources: ["token"],
    topLevel: ["secrets", "imagePullSecrets", "automountServiceAccountToken"],
  }),
  C("events", "Event", true, {
    shortNames: ["ev"],
    strategy: coreEventStrategy,
    fields: [
      "involvedObject.kind",
      "involvedObject.namespace",
      "involvedObject.name",
      "involvedObject.uid",
      "involvedObject.apiVersion",
      "involvedObject.resourceVersion",
      "involvedObject.fieldPath",
      "reason",
      "reportingComponent",
      "source",
      "type",
    ],
    topLevel: [
      "involvedObject",
      "reason",
      "message",
      "source",
      "firstTimestamp",
      "lastTimestamp",
      "count",
      "type",
      "eventTime",
      "series",
      "action",
      "related",
      "reportingComponent",
      "reportingInstance",
    ],
  }),
  C("persistentvolumeclaims", "PersistentVolumeClaim", true, {
    shortNames: ["pvc"],
    subresources: ["status"],
    strategy: persistentVolumeClaimStrategy,
  }),
  C("persistentvolumes", "PersistentVolume", false, {
    shortNames: ["pv"],
    subresources: ["status"],
    strategy: persistentVolumeStrategy,
  }),
  G("storage.k8s.io", "v1", "storageclasses", "StorageClass", false, {
    shortNames: ["sc"],
    topLevel: [
      "provisioner",
      "parameters",
      "reclaimPolicy",
      "mountOptions",
      "allowVolumeExpansion",
      "volumeBindingMode",
      "allowedTopologies",
    ],
    strategy: storageClassStrategy,
  }),
  G("apps", "v1", "deployments", "Deployment", true, {
    shortNames: ["deploy"],
    categories: ["all"],
    subresources: ["status"],
    generation: true,
  }),
  G("apps", "v1", "daemonsets", "DaemonSet", true, {
    shortNames: ["ds"],
    categories: ["all"],
    subresources: ["status"],
    generation: true,
  }),
  G("apps", "v1", "replicasets", "ReplicaSet", true, {
    shortNames: ["rs"],
    categories: ["all"],
    subresources: ["status"],
    generation: true,
  }),
  G("apps", "v1", "statefulsets", "StatefulSet", true, {
    shortNames: ["sts"],
    categories: ["all"],
    subresources: ["status"],
    generation: true,
  }),
  // Instancetype and preference revisions that virt-controller pins a VM to (KubeVirt stores them as these).
  G("apps", "v1", "controllerrevisions", "ControllerRevision", true, { topLevel: ["data", "revision"] }),
  G("coordination.k8s.io", "v1", "leases", "Lease", true),
  G("events.k8s.io", "v1", "events", "Event", true, {
    shortNames: ["ev"],
    topLevel: [
      "eventTime",
      "series",
      "reportingController",
      "reportingInstance",
      "action",
      "reason",
      "regarding",
      "related",
      "note",
      "type",
      "deprecatedSource",
      "deprecatedFirstTimestamp",
      "deprecatedLastTimestamp",
      "deprecatedCount",
    ],
  }),
  G("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", true, {
    shortNames: ["pdb"],
    subresources: ["status"],
    generation: true,
  }),
  // Release manifests ship KubeVirt's priority class; the local scheduler does not preempt, so it is only stored.
  G("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", false, {
    shortNames: ["pc"],
    topLevel: ["value", "globalDefault", "description", "preemptionPolicy"],
  }),
  G("rbac.authorization.k8s.io", "v1", "roles", "Role", true, { topLevel: ["rules"] }),
  G("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", true, { topLevel: ["roleRef", "subjects"] }),
  G("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", false, {
    topLevel: ["rules", "aggregationRule"],
  }),
  G("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", false, {
    topLevel: ["roleRef", "subjects"],
  }),
  G("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", false, {
    shortNames: ["crd", "crds"],
    categories: ["api-extensions"],
    subresources: ["status"],
    generation: true,
    strategy: crdStrategy,
  }),
  G("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", false, {
    categories: ["api-extensions"],
    generation: true,
    topLevel: ["webhooks"],
  }),
  G("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", false, {
    categories: ["api-extensions"],
    generation: true,
    topLevel: ["webhooks"],
  }),
  G("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", false, {
    verbs: ["create"],
    strategy: accessReview,
  }),
  G("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", false, {
    verbs: ["create"],
    strategy: accessReview,
  }),
  G("authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", false, {
    verbs: ["create"],
    strategy: { review: reviewRules },
  }),
  G("apiregistration.k8s.io", "v1", "apiservices", "APIService", false, {
    categories: ["api-extensions"],
    subresources: ["status"],
  }),
];

function toDef(s: Spec): ResourceDef {
  const fields = new Map<string, FieldGetter>();
  for (const f of s.fields ?? []) fields.set(f, pathGetter(f));
  const coll = `${s.group || "core"}/${s.resource}`;
  const topLevel = s.topLevel ?? ["spec", "status"];
  return {
    group: s.group,
    versions: [s.version],
    resource: s.resource,
    kind: s.kind,
    listKind: `${s.kind}List`,
    singular: s.kind.toLowerCase(),
    namespaced: s.namespaced,
    shortNames: s.shortNames ?? [],
    categories: s.categories ?? [],
    verbs: s.verbs ?? ALL_VERBS,
    subresources: s.subresources ?? [],
    columns: BUILTIN_COLUMNS.get(coll) ?? [AGE],
    fields,
    generation: s.generation ?? false,
    unconditionalUpdate: true,
    returnDeletedObject: s.resource === "pods",
    custom: false,
    schemas: new Map([[s.version, permissiveSchema(topLevel)]]),
    strategy: s.strategy ?? {},
    nameIsLabel: s.nameIsLabel ?? false,
    omitNameColumn: coll === "core/events",
    ...(coll === "storage.k8s.io/storageclasses" ? { nameCell: storageClassName } : {}),
  };
}

/** Strategies that need the server's state (the Services' ClusterIP allocator). */
export interface BuiltinStrategies {
  readonly services?: Strategy;
}

/** Every built-in resource definition. */
export function builtinResources(strategies: BuiltinStrategies = {}): ResourceDef[] {
  return SPECS.map((s) =>
    toDef(s.resource === "services" && strategies.services ? { ...s, strategy: strategies.services } : s),
  );
}
