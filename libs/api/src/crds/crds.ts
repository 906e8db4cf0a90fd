/**
 * The CustomResourceDefinitions (apiextensions.k8s.io/v1) of VirtualMachine, VirtualMachineInstance,
 * VirtualMachineInstanceMigration, MigrationPolicy and KubeVirt, built from the schemas in `schema/`. Names, short names,
 * categories, printer columns and subresources follow KubeVirt's virt-operator (`components/crds.go`):
 *
 * | kind  | short names | status subresource | printer columns                                          |
 * | ----- | ----------- | ------------------ | -------------------------------------------------------- |
 * | VM    | vm, vms     | yes                | Age, Status, Ready                                       |
 * | VMI   | vmi, vmis   | no (as KubeVirt)   | Age, Phase, IP, NodeName, Ready, Live-Migratable*, Paused* |
 * | VMIM  | vmim, vmims | yes                | Phase, VMI                                               |
 * | MigrationPolicy (cluster-scoped) | - | yes | -                                                       |
 * | KubeVirt (the configuration CR) | kv, kvs | yes | Age, Phase                                            |
 * | VMIRS | vmirs, vmirss | yes, and scale   | Desired, Current, Ready, Age                             |
 * | VirtualMachinePool (pool.kubevirt.io v1beta1; v1alpha1 also served) | vmpool, vmpools | yes, and scale | as VMIRS |
 * (* priority 1: shown by `kubectl get -o wide`)
 *
 * KubeVirt's VMI has no status subresource: virt-controller and virt-handler write the status through the main
 * resource, and the VMI update webhook keeps users from changing the spec.
 */
import {
  API_VERSION,
  GROUP,
  KIND,
  LABEL,
  MIGRATIONS_GROUP,
  POOL_API_VERSION,
  POOL_GROUP,
  POOL_VERSION,
  RESOURCE,
  SHORT_NAMES,
  VERSION,
} from "../constants.ts";
import { INSTANCETYPE_API_VERSION, INSTANCETYPE_KINDS } from "../instancetype/instancetype-constants.ts";
import { instancetypeCrds } from "../instancetype/instancetype-crds.ts";
import type { JsonSchema } from "../schema/builder.ts";
import { kubevirtSchema } from "../schema/kubevirt-schemas.ts";
import { objectMetaSchema } from "../schema/meta.ts";
import { migrationPolicySchema, vmimSchema } from "../schema/migration-schemas.ts";
import { vmiPresetSchema } from "../schema/preset-schemas.ts";
import { vmirsSchema, vmPoolSchema } from "../schema/replica-schemas.ts";
import { vmSchema } from "../schema/vm-schemas.ts";
import { vmiSchema } from "../schema/vmi-schemas.ts";

/** One additionalPrinterColumn. */
export interface PrinterColumn {
  name: string;
  type: "string" | "integer" | "number" | "boolean" | "date";
  jsonPath: string;
  description?: string;
  priority?: number;
}

/** A CustomResourceDefinition object (apiextensions.k8s.io/v1), as the API server takes it. */
export interface CustomResourceDefinition {
  apiVersion: "apiextensions.k8s.io/v1";
  kind: "CustomResourceDefinition";
  metadata: { name: string; labels: Record<string, string> };
  spec: {
    group: string;
    names: {
      kind: string;
      listKind: string;
      plural: string;
      singular: string;
      shortNames?: string[];
      categories?: string[];
    };
    scope: "Namespaced" | "Cluster";
    versions: {
      name: string;
      served: boolean;
      storage: boolean;
      deprecated?: boolean;
      deprecationWarning?: string;
      additionalPrinterColumns?: PrinterColumn[];
      schema: { openAPIV3Schema: JsonSchema };
      subresources?: {
        status?: Record<string, never>;
        scale?: { specReplicasPath: string; statusReplicasPath: string; labelSelectorPath?: string };
      };
    }[];
  };
}

const TYPE_META: Record<string, JsonSchema> = {
  apiVersion: {
    description:
      "APIVersion defines the versioned schema of this representation of an object.\nServers should convert recognized schemas to the latest internal value, and\nmay reject unrecognized values.\nMore info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
    type: "string",
  },
  kind: {
    description:
      "Kind is a string value representing the REST resource this object represents.\nServers may infer this from the endpoint the client submits requests to.\nCannot be updated.\nIn CamelCase.\nMore info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
    type: "string",
  },
};

/**
 * The schema as a CRD carries it: the root `metadata` is `{type: object}` (the API server owns ObjectMeta) and
 * embedded template metadata keeps unknown fields, as in KubeVirt's generated CRDs.
 */
function crdSchema(root: JsonSchema): JsonSchema {
  const rewrite = (s: JsonSchema, depth: number): JsonSchema => {
    const out: JsonSchema = { ...s };
    if (s.properties) {
      out.properties = {};
      for (const [k, v] of Object.entries(s.properties)) {
        if (v === objectMetaSchema) {
          out.properties[k] =
            depth === 0
              ? { type: "object" }
              : { nullable: true, type: "object", "x-kubernetes-preserve-unknown-fields": true };
        } else if (depth === 0 && (k === "apiVersion" || k === "kind")) {
          out.properties[k] = TYPE_META[k];
        } else {
          out.properties[k] = rewrite(v, depth + 1);
        }
      }
    }
    if (s.items) out.items = rewrite(s.items, depth + 1);
    if (s.additionalProperties) out.additionalProperties = rewrite(s.additionalProperties, depth + 1);
    return out;
  };
  return rewrite(root, 0);
}

interface CrdInput {
  group: string;
  version: string;
  kind: string;
  plural: string;
  shortNames: readonly string[];
  categories: string[];
  scope: "Namespaced" | "Cluster";
  schema: JsonSchema;
  columns?: PrinterColumn[];
  status: boolean;
  /** The scale subresource (`kubectl scale`, HPA) on spec.replicas / status.replicas / status.labelSelector. */
  scale?: boolean;
  /** Older versions served beside `version` (same schema, not stored), e.g. pool.kubevirt.io/v1alpha1. */
  alsoServed?: string[];
  /** Deprecated versions served after `version` with a warning on every request (kubevirt.io/v1alpha3). */
  deprecated?: readonly { name: string; warning: string }[];
  /** `version` itself is deprecated, with this warning (VirtualMachineInstancePreset). */
  versionDeprecation?: string;
}

/** kubevirt.io/v1alpha3, still served by KubeVirt for its core kinds with this warning (`ApiSupportedVersions`). */
const V1ALPHA3 = [
  { name: "v1alpha3", warning: "kubevirt.io/v1alpha3 is now deprecated and will be removed in a future release." },
] as const;

function buildCrd(i: CrdInput): CustomResourceDefinition {
  const names: CustomResourceDefinition["spec"]["names"] = {
    kind: i.kind,
    listKind: `${i.kind}List`,
    plural: i.plural,
    singular: i.kind.toLowerCase(),
  };
  if (i.shortNames.length > 0) names.shortNames = [...i.shortNames];
  if (i.categories.length > 0) names.categories = i.categories;
  const version: CustomResourceDefinition["spec"]["versions"][number] = {
    name: i.version,
    served: true,
    storage: true,
    schema: { openAPIV3Schema: crdSchema(i.schema) },
  };
  if (i.columns) version.additionalPrinterColumns = i.columns;
  if (i.versionDeprecation) Object.assign(version, { deprecated: true, deprecationWarning: i.versionDeprecation });
  if (i.status) version.subresources = { status: {} };
  if (i.scale)
    version.subresources = {
      ...version.subresources,
      scale: {
        specReplicasPath: ".spec.replicas",
        statusReplicasPath: ".status.replicas",
        labelSelectorPath: ".status.labelSelector",
      },
    };
  const older = (i.alsoServed ?? []).map((name) => ({ ...structuredClone(version), name, storage: false }));
  const deprecated = (i.deprecated ?? []).map((d) => ({
    ...structuredClone(version),
    name: d.name,
    storage: false,
    deprecated: true,
    deprecationWarning: d.warning,
  }));
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${i.plural}.${i.group}`, labels: { [LABEL.app]: "" } },
    spec: { group: i.group, names, scope: i.scope, versions: [...older, version, ...deprecated] },
  };
}

const AGE: PrinterColumn = { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" };
const READY: PrinterColumn = {
  name: "Ready",
  type: "string",
  jsonPath: ".status.conditions[?(@.type=='Ready')].status",
};

/**
 * The CRDs, freshly built (callers may mutate them). The local API server and tests install these; the files
 * under libs/api/crds/ are the same objects rendered by `npm run gen:crds -w @kvt/api`.
 */
export function customResourceDefinitions(): CustomResourceDefinition[] {
  return [
    buildCrd({
      group: GROUP,
      version: VERSION,
      kind: KIND.VirtualMachineInstance,
      deprecated: V1ALPHA3,
      plural: RESOURCE.virtualMachineInstances,
      shortNames: SHORT_NAMES.VirtualMachineInstance,
      categories: ["all"],
      scope: "Namespaced",
      schema: vmiSchema,
      status: false,
      columns: [
        AGE,
        { name: "Phase", type: "string", jsonPath: ".status.phase" },
        { name: "IP", type: "string", jsonPath: ".status.interfaces[0].ipAddress" },
        { name: "NodeName", type: "string", jsonPath: ".status.nodeName" },
        READY,
        {
          name: "Live-Migratable",
          type: "string",
          jsonPath: ".status.conditions[?(@.type=='LiveMigratable')].status",
          priority: 1,
        },
        { name: "Paused", type: "string", jsonPath: ".status.conditions[?(@.type=='Paused')].status", priority: 1 },
      ],
    }),
    buildCrd({
      group: GROUP,
      version: VERSION,
      kind: KIND.VirtualMachine,
      deprecated: V1ALPHA3,
      plural: RESOURCE.virtualMachines,
      shortNames: SHORT_NAMES.VirtualMachine,
      categories: ["all"],
      scope: "Namespaced",
      schema: vmSchema,
      status: true,
      columns: [
        AGE,
        { name: "Status", type: "string", jsonPath: ".status.printableStatus", description: "Human Readable Status" },
        READY,
      ],
    }),
    buildCrd({
      group: GROUP,
      version: VERSION,
      kind: KIND.VirtualMachineInstanceMigration,
      deprecated: V1ALPHA3,
      plural: RESOURCE.virtualMachineInstanceMigrations,
      shortNames: SHORT_NAMES.VirtualMachineInstanceMigration,
      categories: ["all"],
      scope: "Namespaced",
      schema: vmimSchema,
      status: true,
      columns: [
        {
          name: "Phase",
          type: "string",
          jsonPath: ".status.phase",
          description: "The current phase of VM instance migration",
        },
        {
          name: "VMI",
          type: "string",
          jsonPath: ".spec.vmiName",
          description: "The name of the VMI to perform the migration on",
        },
      ],
    }),
    buildCrd({
      group: MIGRATIONS_GROUP,
      version: "v1alpha1",
      kind: KIND.MigrationPolicy,
      plural: RESOURCE.migrationPolicies,
      shortNames: SHORT_NAMES.MigrationPolicy,
      categories: [],
      scope: "Cluster",
      schema: migrationPolicySchema,
      status: true,
    }),
    buildCrd({
      group: GROUP,
      version: VERSION,
      kind: KIND.KubeVirt,
      deprecated: V1ALPHA3,
      plural: RESOURCE.kubevirts,
      shortNames: SHORT_NAMES.KubeVirt,
      categories: ["all"],
      scope: "Namespaced",
      schema: kubevirtSchema,
      status: true,
      columns: [AGE, { name: "Phase", type: "string", jsonPath: ".status.phase" }],
    }),
    buildCrd({
      group: GROUP,
      version: VERSION,
      kind: KIND.VirtualMachineInstanceReplicaSet,
      deprecated: V1ALPHA3,
      plural: RESOURCE.virtualMachineInstanceReplicaSets,
      shortNames: SHORT_NAMES.VirtualMachineInstanceReplicaSet,
      categories: ["all"],
      scope: "Namespaced",
      schema: vmirsSchema,
      status: true,
      scale: true,
      columns: replicaColumns("VirtualMachineInstances"),
    }),
    buildCrd({
      group: POOL_GROUP,
      version: POOL_VERSION,
      alsoServed: ["v1alpha1"],
      kind: KIND.VirtualMachinePool,
      plural: RESOURCE.virtualMachinePools,
      shortNames: SHORT_NAMES.VirtualMachinePool,
      categories: ["all"],
      scope: "Namespaced",
      schema: vmPoolSchema,
      status: true,
      scale: true,
      columns: replicaColumns("VirtualMachines"),
    }),
    // Deprecated by KubeVirt in both versions; stored here as v1 (KubeVirt stores v1alpha3) so that the preferred
    // version, which the embedded API server takes from the storage version, is v1 as on kube-apiserver.
    buildCrd({
      group: GROUP,
      version: VERSION,
      kind: KIND.VirtualMachineInstancePreset,
      versionDeprecation: "kubevirt.io/v1 VirtualMachineInstancePresets is now deprecated and will be removed in v2.",
      deprecated: [
        {
          name: "v1alpha3",
          warning: "kubevirt.io/v1alpha3 VirtualMachineInstancePresets is now deprecated and will be removed in v2.",
        },
      ],
      plural: RESOURCE.virtualMachineInstancePresets,
      shortNames: SHORT_NAMES.VirtualMachineInstancePreset,
      categories: ["all"],
      scope: "Namespaced",
      schema: vmiPresetSchema,
      status: false,
    }),
    ...instancetypeCrds(buildCrd),
  ];
}

/** Desired, Current, Ready, Age: the columns of VirtualMachineInstanceReplicaSet and VirtualMachinePool. */
function replicaColumns(what: string): PrinterColumn[] {
  return [
    { name: "Desired", type: "integer", jsonPath: ".spec.replicas", description: `Number of desired ${what}` },
    {
      name: "Current",
      type: "integer",
      jsonPath: ".status.replicas",
      description: `Number of managed and not final or deleted ${what}`,
    },
    {
      name: "Ready",
      type: "integer",
      jsonPath: ".status.readyReplicas",
      description: `Number of managed ${what} which are ready to receive traffic`,
    },
    AGE,
  ];
}

/** The stored version of a CRD (where its schema and subresources are read). */
function storedVersion(
  crd: CustomResourceDefinition,
): CustomResourceDefinition["spec"]["versions"][number] | undefined {
  return crd.spec.versions.find((v) => v.storage);
}

/** The openAPIV3Schema of a kind (e.g. for `/openapi/v3` and `kubectl explain`), keyed by `apiVersion` and kind. */
export function openApiSchemaOf(apiVersion: string, kind: string): JsonSchema | undefined {
  for (const crd of customResourceDefinitions()) {
    const v = crd.spec.versions.find((x) => `${crd.spec.group}/${x.name}` === apiVersion);
    if (crd.spec.names.kind === kind && v) return v.schema.openAPIV3Schema;
  }
  return undefined;
}

/** Whether KubeVirt gives the kind a `/status` subresource (VM, VMIM, MigrationPolicy: yes; VMI: no). */
export function hasStatusSubresource(kind: string): boolean {
  return customResourceDefinitions().some((c) => c.spec.names.kind === kind && storedVersion(c)?.subresources?.status);
}

/** Default `apiVersion` for a kind of this API. */
export function apiVersionOf(kind: string): string {
  if (kind in INSTANCETYPE_KINDS) return INSTANCETYPE_API_VERSION;
  if (kind === KIND.MigrationPolicy) return "migrations.kubevirt.io/v1alpha1";
  return kind === KIND.VirtualMachinePool ? POOL_API_VERSION : API_VERSION;
}
