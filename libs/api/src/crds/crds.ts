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
 * (* priority 1: shown by `kubectl get -o wide`)
 *
 * KubeVirt's VMI has no status subresource: virt-controller and virt-handler write the status through the main
 * resource, and the VMI update webhook keeps users from changing the spec.
 */
import { API_VERSION, GROUP, KIND, LABEL, MIGRATIONS_GROUP, RESOURCE, SHORT_NAMES, VERSION } from "../constants.ts";
import type { JsonSchema } from "../schema/builder.ts";
import { kubevirtSchema } from "../schema/kubevirt-schemas.ts";
import { objectMetaSchema } from "../schema/meta.ts";
import { migrationPolicySchema, vmimSchema } from "../schema/migration-schemas.ts";
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
      additionalPrinterColumns?: PrinterColumn[];
      schema: { openAPIV3Schema: JsonSchema };
      subresources?: { status?: Record<string, never> };
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
}

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
  if (i.status) version.subresources = { status: {} };
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${i.plural}.${i.group}`, labels: { [LABEL.app]: "" } },
    spec: { group: i.group, names, scope: i.scope, versions: [version] },
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
      plural: RESOURCE.kubevirts,
      shortNames: SHORT_NAMES.KubeVirt,
      categories: ["all"],
      scope: "Namespaced",
      schema: kubevirtSchema,
      status: true,
      columns: [AGE, { name: "Phase", type: "string", jsonPath: ".status.phase" }],
    }),
  ];
}

/** The openAPIV3Schema of a kind (e.g. for `/openapi/v3` and `kubectl explain`), keyed by `apiVersion` and kind. */
export function openApiSchemaOf(apiVersion: string, kind: string): JsonSchema | undefined {
  for (const crd of customResourceDefinitions()) {
    const v = crd.spec.versions[0];
    if (crd.spec.names.kind === kind && v && `${crd.spec.group}/${v.name}` === apiVersion) {
      return v.schema.openAPIV3Schema;
    }
  }
  return undefined;
}

/** Whether KubeVirt gives the kind a `/status` subresource (VM, VMIM, MigrationPolicy: yes; VMI: no). */
export function hasStatusSubresource(kind: string): boolean {
  return customResourceDefinitions().some(
    (c) => c.spec.names.kind === kind && c.spec.versions[0]?.subresources?.status,
  );
}

/** Default `apiVersion` for a kind of this API. */
export function apiVersionOf(kind: string): string {
  return kind === KIND.MigrationPolicy ? "migrations.kubevirt.io/v1alpha1" : API_VERSION;
}
