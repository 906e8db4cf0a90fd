/**
 * Offline validation of release objects against real API schemas, for the kinds a test cluster does not check:
 *
 * - `kubernetes-models` (Kubernetes' OpenAPI as JSON Schema, run by ajv): types, formats, required fields, enums of
 *   every built-in kind, and prometheus-operator's CRD schemas for ServiceMonitor and PrometheusRule
 *   (`@kubernetes-models/prometheus-operator`).
 * - @kubernetes/client-node's models (generated from Kubernetes' OpenAPI, release-1.36): unknown fields, as
 *   `kubectl --validate=strict` reports them (the JSON Schemas above allow additional properties, as the API does).
 *
 * Test support: imports devDependencies only.
 */
import * as k8s from "@kubernetes/client-node";
import { PrometheusRule, ServiceMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";
import {
  MutatingWebhookConfiguration,
  ValidatingWebhookConfiguration,
} from "kubernetes-models/admissionregistration.k8s.io/v1";
import { CustomResourceDefinition } from "kubernetes-models/apiextensions.k8s.io/v1";
import { APIService } from "kubernetes-models/apiregistration.k8s.io/v1";
import { DaemonSet, Deployment } from "kubernetes-models/apps/v1";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { ClusterRole, ClusterRoleBinding, Role, RoleBinding } from "kubernetes-models/rbac.authorization.k8s.io/v1";
import { PriorityClass } from "kubernetes-models/scheduling.k8s.io/v1";
import { ConfigMap, Namespace, Service, ServiceAccount } from "kubernetes-models/v1";

/** A model that validates itself (throws on the first failures). */
interface Validating {
  validate(): void;
}

type ModelFactory = (o: unknown) => Validating;

// Each model constructor takes its own typed shape; the object is checked at run time, so any input goes in.
const as =
  (M: new (o: never) => Validating): ModelFactory =>
  (o) =>
    new M(o as never);

/** `apiVersion/kind` -> JSON Schema model and client-node model name. */
const KINDS: ReadonlyMap<string, { model: ModelFactory; fields?: string }> = new Map([
  ["v1/Namespace", { model: as(Namespace), fields: "V1Namespace" }],
  ["v1/ServiceAccount", { model: as(ServiceAccount), fields: "V1ServiceAccount" }],
  ["v1/Service", { model: as(Service), fields: "V1Service" }],
  ["v1/ConfigMap", { model: as(ConfigMap), fields: "V1ConfigMap" }],
  ["apps/v1/Deployment", { model: as(Deployment), fields: "V1Deployment" }],
  ["apps/v1/DaemonSet", { model: as(DaemonSet), fields: "V1DaemonSet" }],
  ["policy/v1/PodDisruptionBudget", { model: as(PodDisruptionBudget), fields: "V1PodDisruptionBudget" }],
  ["scheduling.k8s.io/v1/PriorityClass", { model: as(PriorityClass), fields: "V1PriorityClass" }],
  ["rbac.authorization.k8s.io/v1/ClusterRole", { model: as(ClusterRole), fields: "V1ClusterRole" }],
  [
    "rbac.authorization.k8s.io/v1/ClusterRoleBinding",
    { model: as(ClusterRoleBinding), fields: "V1ClusterRoleBinding" },
  ],
  ["rbac.authorization.k8s.io/v1/Role", { model: as(Role), fields: "V1Role" }],
  ["rbac.authorization.k8s.io/v1/RoleBinding", { model: as(RoleBinding), fields: "V1RoleBinding" }],
  [
    "admissionregistration.k8s.io/v1/MutatingWebhookConfiguration",
    { model: as(MutatingWebhookConfiguration), fields: "V1MutatingWebhookConfiguration" },
  ],
  [
    "admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration",
    { model: as(ValidatingWebhookConfiguration), fields: "V1ValidatingWebhookConfiguration" },
  ],
  ["apiregistration.k8s.io/v1/APIService", { model: as(APIService), fields: "V1APIService" }],
  [
    "apiextensions.k8s.io/v1/CustomResourceDefinition",
    { model: as(CustomResourceDefinition), fields: "V1CustomResourceDefinition" },
  ],
  ["monitoring.coreos.com/v1/ServiceMonitor", { model: as(ServiceMonitor) }],
  ["monitoring.coreos.com/v1/PrometheusRule", { model: as(PrometheusRule) }],
]);

interface Attribute {
  readonly baseName: string;
  readonly type: string;
}

function attributesOf(model: string): readonly Attribute[] | undefined {
  const cls = (k8s as unknown as Record<string, { getAttributeTypeMap?: () => Attribute[] } | undefined>)[model];
  return cls?.getAttributeTypeMap?.();
}

const ARRAY = /^Array<(.+)>$/;
const MAP = /^\{ \[key: string\]: (.+); \}$/;

/** Paths of fields that `type` (a client-node type name) does not define, below `path`. */
function unknownFields(value: unknown, type: string, path: string): string[] {
  const array = ARRAY.exec(type);
  if (array?.[1]) {
    if (!Array.isArray(value)) return [];
    const item = array[1];
    return value.flatMap((v, i) => unknownFields(v, item, `${path}[${i}]`));
  }
  const map = MAP.exec(type);
  if (map?.[1]) {
    if (typeof value !== "object" || value === null) return [];
    const item = map[1];
    return Object.entries(value).flatMap(([k, v]) => unknownFields(v, item, `${path}.${k}`));
  }
  const attributes = attributesOf(type);
  if (!attributes || typeof value !== "object" || value === null || Array.isArray(value)) return [];
  const byName = new Map(attributes.map((a) => [a.baseName, a.type]));
  return Object.entries(value).flatMap(([k, v]) => {
    const t = byName.get(k);
    return t === undefined ? [`${path}.${k}`] : unknownFields(v, t, `${path}.${k}`);
  });
}

/** What is wrong with `o` by the schemas of its kind; empty when it is valid. Unknown kinds are an error. */
export function schemaErrors(o: { apiVersion?: unknown; kind?: unknown }): string[] {
  const key = `${String(o.apiVersion)}/${String(o.kind)}`;
  const spec = KINDS.get(key);
  if (!spec) return [`no schema for ${key}`];
  const errors: string[] = [];
  try {
    spec.model(o).validate();
  } catch (error) {
    errors.push((error as Error).message);
  }
  if (spec.fields) errors.push(...unknownFields(o, spec.fields, "").map((p) => `unknown field "${p.slice(1)}"`));
  return errors;
}

/** The `apiVersion/kind` keys {@link schemaErrors} knows. */
export function validatedKinds(): string[] {
  return [...KINDS.keys()];
}
