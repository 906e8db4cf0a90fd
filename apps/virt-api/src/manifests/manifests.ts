/**
 * The objects a cluster needs to route to virt-api (KubeVirt's `webhooks.go` and `apiservices.go`): a
 * MutatingWebhookConfiguration, a ValidatingWebhookConfiguration and the APIServices for
 * `subresources.kubevirt.io` v1 and v1alpha3, all pointing at Service `<namespace>/virt-api` port 443 (or at a
 * URL, for a local API server). Their `caBundle` is the KubeVirt CA bundle when one is given; a release leaves it
 * out, and virt-controller's certificate manager fills it in (CA_BUNDLE_TARGETS), as virt-operator does.
 */
import { CA_BUNDLE_TARGETS } from "@kvt/api";

/** Where the API server reaches virt-api. */
export interface VirtApiEndpoint {
  /** Namespace of the `virt-api` Service; default `kubevirt`. */
  readonly namespace?: string;
  /** A URL base (`https://127.0.0.1:8443`) instead of the Service, for API servers outside the cluster network. */
  readonly url?: string;
  /**
   * Keep the Service references, and tell an API server outside the cluster network where the Service answers
   * ({@link URL_ANNOTATION} on every object); it still verifies the certificate as `virt-api.<namespace>.svc`.
   */
  readonly serviceUrl?: string;
  /** PEM of the CA bundle that signed virt-api's serving certificate; absent: no caBundle. */
  readonly caPem?: string;
}

interface WebhookSpec {
  readonly name: string;
  readonly path: string;
  readonly resources: readonly string[];
  readonly group: string;
  readonly version: string;
  readonly operations: readonly string[];
  /** Default `None`. */
  readonly sideEffects?: "None" | "NoneOnDryRun";
  /** Default `["v1"]`. */
  readonly admissionReviewVersions?: readonly string[];
  /** CEL conditions the API server checks before calling (admissionregistration.k8s.io/v1 matchConditions). */
  readonly matchConditions?: readonly { readonly name: string; readonly expression: string }[];
}

const MUTATING: readonly WebhookSpec[] = [
  {
    name: "virtualmachines-mutator.kubevirt.io",
    path: "/virtualmachines-mutate",
    resources: ["virtualmachines"],
    group: "kubevirt.io",
    version: "v1",
    operations: ["CREATE", "UPDATE"],
  },
  {
    name: "virtualmachineinstances-mutator.kubevirt.io",
    path: "/virtualmachineinstances-mutate",
    resources: ["virtualmachineinstances"],
    group: "kubevirt.io",
    version: "v1",
    operations: ["CREATE"],
  },
  {
    name: "migrations-mutator.kubevirt.io",
    path: "/migration-mutate-create",
    resources: ["virtualmachineinstancemigrations"],
    group: "kubevirt.io",
    version: "v1",
    operations: ["CREATE"],
  },
];

const VALIDATING: readonly WebhookSpec[] = [
  // Evictions of launcher pods start an evacuation (pod-eviction-admitter.ts); of hotplug volume pods, are refused.
  {
    name: "virt-launcher-eviction-interceptor.kubevirt.io",
    path: "/pod-eviction-validate",
    resources: ["pods/eviction"],
    group: "",
    version: "v1",
    operations: ["*"],
    sideEffects: "NoneOnDryRun",
    matchConditions: [{ name: "only-vms", expression: 'object.metadata.name.startsWith("virt-launcher")' }],
  },
  {
    name: "hotplug-pod-eviction-interceptor.kubevirt.io",
    path: "/pod-eviction-validate",
    resources: ["pods/eviction"],
    group: "",
    version: "v1",
    operations: ["*"],
    sideEffects: "NoneOnDryRun",
    admissionReviewVersions: ["v1", "v1beta1"],
    matchConditions: [{ name: "only-hotplug-pods", expression: 'object.metadata.name.startsWith("hp-volume-")' }],
  },
  {
    name: "virtualmachine-validator.kubevirt.io",
    path: "/virtualmachines-validate",
    resources: ["virtualmachines"],
    group: "kubevirt.io",
    version: "v1",
    operations: ["CREATE", "UPDATE"],
  },
  {
    name: "virtualmachineinstances-create-validator.kubevirt.io",
    path: "/virtualmachineinstances-validate-create",
    resources: ["virtualmachineinstances"],
    group: "kubevirt.io",
    version: "v1",
    operations: ["CREATE"],
  },
  {
    name: "virtualmachineinstances-update-validator.kubevirt.io",
    path: "/virtualmachineinstances-validate-update",
    resources: ["virtualmachineinstances"],
    group: "kubevirt.io",
    version: "v1",
    operations: ["UPDATE"],
  },
  {
    name: "migration-create-validator.kubevirt.io",
    path: "/migration-validate-create",
    resources: ["virtualmachineinstancemigrations"],
    group: "kubevirt.io",
    version: "v1",
    operations: ["CREATE"],
  },
  {
    name: "migration-update-validator.kubevirt.io",
    path: "/migration-validate-update",
    resources: ["virtualmachineinstancemigrations"],
    group: "kubevirt.io",
    version: "v1",
    operations: ["UPDATE"],
  },
  {
    name: "virtualmachinereplicaset-validator.kubevirt.io",
    path: "/virtualmachinereplicaset-validate",
    resources: ["virtualmachineinstancereplicasets"],
    group: "kubevirt.io",
    version: "v1",
    operations: ["CREATE", "UPDATE"],
  },
  {
    name: "virtualmachinepool-validator.kubevirt.io",
    path: "/virtualmachinepool-validate",
    resources: ["virtualmachinepools"],
    group: "pool.kubevirt.io",
    version: "v1beta1",
    operations: ["CREATE", "UPDATE"],
  },
  {
    name: "kubevirt-update-validator.kubevirt.io",
    path: "/kubevirt-validate-update",
    resources: ["kubevirts"],
    group: "kubevirt.io",
    version: "v1",
    operations: ["UPDATE"],
  },
  {
    name: "migration-policy-validator.kubevirt.io",
    path: "/migration-policy-validate-create",
    resources: ["migrationpolicies"],
    group: "migrations.kubevirt.io",
    version: "v1alpha1",
    operations: ["CREATE", "UPDATE"],
  },
  {
    name: "virtualmachineinstancetype-validator.instancetype.kubevirt.io",
    path: "/virtualmachineinstancetypes-validate",
    resources: ["virtualmachineinstancetypes"],
    group: "instancetype.kubevirt.io",
    version: "v1beta1",
    operations: ["CREATE", "UPDATE"],
  },
  {
    name: "virtualmachineclusterinstancetype-validator.instancetype.kubevirt.io",
    path: "/virtualmachineclusterinstancetypes-validate",
    resources: ["virtualmachineclusterinstancetypes"],
    group: "instancetype.kubevirt.io",
    version: "v1beta1",
    operations: ["CREATE", "UPDATE"],
  },
  {
    name: "virtualmachinepreference-validator.instancetype.kubevirt.io",
    path: "/virtualmachinepreferences-validate",
    resources: ["virtualmachinepreferences"],
    group: "instancetype.kubevirt.io",
    version: "v1beta1",
    operations: ["CREATE", "UPDATE"],
  },
  {
    name: "virtualmachineclusterpreference-validator.instancetype.kubevirt.io",
    path: "/virtualmachineclusterpreferences-validate",
    resources: ["virtualmachineclusterpreferences"],
    group: "instancetype.kubevirt.io",
    version: "v1beta1",
    operations: ["CREATE", "UPDATE"],
  },
];

function caBundleOf(endpoint: VirtApiEndpoint): { caBundle?: string } {
  return endpoint.caPem === undefined ? {} : { caBundle: Buffer.from(endpoint.caPem).toString("base64") };
}

function clientConfig(endpoint: VirtApiEndpoint, path: string): Record<string, unknown> {
  if (endpoint.url) return { url: `${endpoint.url.replace(/\/$/, "")}${path}`, ...caBundleOf(endpoint) };
  const service = { namespace: endpoint.namespace ?? "kubevirt", name: "virt-api", path, port: 443 };
  return { service, ...caBundleOf(endpoint) };
}

/** The annotation telling an API server outside the cluster where the Service answers, when there is one. */
function urlAnnotation(endpoint: VirtApiEndpoint): { annotations?: Record<string, string> } {
  const url = endpoint.url ?? endpoint.serviceUrl;
  return url ? { annotations: { [URL_ANNOTATION]: url } } : {};
}

function webhook(endpoint: VirtApiEndpoint, spec: WebhookSpec, mutating: boolean): Record<string, unknown> {
  return {
    name: spec.name,
    clientConfig: clientConfig(endpoint, spec.path),
    rules: [
      {
        operations: [...spec.operations],
        apiGroups: [spec.group],
        apiVersions: [spec.version],
        resources: [...spec.resources],
        scope: "*",
      },
    ],
    failurePolicy: "Fail",
    sideEffects: spec.sideEffects ?? "None",
    admissionReviewVersions: [...(spec.admissionReviewVersions ?? ["v1"])],
    timeoutSeconds: 10,
    matchPolicy: "Equivalent",
    ...(spec.matchConditions ? { matchConditions: spec.matchConditions.map((c) => ({ ...c })) } : {}),
    ...(mutating ? { reinvocationPolicy: "Never" } : {}),
  };
}

/**
 * APIService has no URL field; for an API server that cannot resolve the Service (the local one), this
 * annotation on the APIService carries virt-api's base URL.
 */
export const URL_ANNOTATION = "kubevirt-ts.io/service-url";

const LABELS = { "app.kubernetes.io/managed-by": "virt-operator", "kubevirt.io": "virt-api-aggregator" };

/** `MutatingWebhookConfiguration virt-api-mutator`. */
export function mutatingWebhookConfiguration(endpoint: VirtApiEndpoint): Record<string, unknown> {
  return {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "MutatingWebhookConfiguration",
    metadata: { name: CA_BUNDLE_TARGETS.mutatingWebhookConfigurations[0], labels: LABELS, ...urlAnnotation(endpoint) },
    webhooks: MUTATING.map((s) => webhook(endpoint, s, true)),
  };
}

/** `ValidatingWebhookConfiguration virt-api-validator`. */
export function validatingWebhookConfiguration(endpoint: VirtApiEndpoint): Record<string, unknown> {
  return {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "ValidatingWebhookConfiguration",
    metadata: {
      name: CA_BUNDLE_TARGETS.validatingWebhookConfigurations[0],
      labels: LABELS,
      ...urlAnnotation(endpoint),
    },
    webhooks: VALIDATING.map((s) => webhook(endpoint, s, false)),
  };
}

/** `APIService <version>.subresources.kubevirt.io` for v1 and v1alpha3. */
export function apiServices(endpoint: VirtApiEndpoint): Record<string, unknown>[] {
  return ["v1", "v1alpha3"].map((version) => ({
    apiVersion: "apiregistration.k8s.io/v1",
    kind: "APIService",
    metadata: { name: `${version}.subresources.kubevirt.io`, labels: LABELS, ...urlAnnotation(endpoint) },
    spec: {
      group: "subresources.kubevirt.io",
      version,
      groupPriorityMinimum: 1000,
      versionPriority: 15,
      ...caBundleOf(endpoint),
      service: { namespace: endpoint.namespace ?? "kubevirt", name: "virt-api", port: 443 },
    },
  }));
}

/** All wiring objects, in apply order. */
export function virtApiManifests(endpoint: VirtApiEndpoint): Record<string, unknown>[] {
  return [mutatingWebhookConfiguration(endpoint), validatingWebhookConfiguration(endpoint), ...apiServices(endpoint)];
}
