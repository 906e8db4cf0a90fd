/**
 * CustomResourceDefinitions (apiextensions.k8s.io/v1): validation of the CRD itself, the status the real
 * apiextensions controllers write (NamesAccepted, Established, acceptedNames, storedVersions), and the
 * conversion of a CRD into the ResourceDef the server serves.
 */
import type { StatusCause } from "../errors.ts";
import { pathGetter } from "../selectors/fields.ts";
import { AGE } from "../table/printers.ts";
import { type KubeObject, nowTime } from "../types.ts";
import type { JSONSchemaProps } from "./schema.ts";
import type { PrinterColumn, ResourceDef, Strategy } from "./types.ts";

/** The parts of a CRD the server reads. */
export interface CrdSpec {
  group: string;
  scope: "Namespaced" | "Cluster";
  names: {
    plural: string;
    singular?: string;
    kind: string;
    listKind?: string;
    shortNames?: string[];
    categories?: string[];
  };
  versions: {
    name: string;
    served: boolean;
    storage: boolean;
    deprecated?: boolean;
    deprecationWarning?: string;
    schema?: { openAPIV3Schema?: JSONSchemaProps };
    subresources?: {
      status?: Record<string, never>;
      scale?: { specReplicasPath: string; statusReplicasPath: string; labelSelectorPath?: string };
    };
    additionalPrinterColumns?: {
      name: string;
      type: string;
      format?: string;
      description?: string;
      priority?: number;
      jsonPath: string;
    }[];
    selectableFields?: { jsonPath: string }[];
  }[];
}

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

function validateCrd(o: KubeObject): StatusCause[] {
  const causes: StatusCause[] = [];
  const spec = o.spec as Partial<CrdSpec> | undefined;
  const req = (field: string): void =>
    void causes.push({ reason: "FieldValueRequired", message: "Required value", field });
  if (!spec) return [{ reason: "FieldValueRequired", message: "Required value", field: "spec" }];
  if (!spec.group) req("spec.group");
  else if (!DNS_SUBDOMAIN.test(spec.group) || !spec.group.includes("."))
    causes.push({
      reason: "FieldValueInvalid",
      message: `Invalid value: "${spec.group}": should be a domain with at least one dot`,
      field: "spec.group",
    });
  if (!spec.names?.plural) req("spec.names.plural");
  else if (!DNS_LABEL.test(spec.names.plural))
    causes.push({
      reason: "FieldValueInvalid",
      message: `Invalid value: "${spec.names.plural}": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'`,
      field: "spec.names.plural",
    });
  if (!spec.names?.kind) req("spec.names.kind");
  if (spec.scope !== "Namespaced" && spec.scope !== "Cluster")
    causes.push({
      reason: "FieldValueNotSupported",
      message: `Unsupported value: "${String(spec.scope)}": supported values: "Cluster", "Namespaced"`,
      field: "spec.scope",
    });
  const versions = spec.versions ?? [];
  if (versions.length === 0) req("spec.versions");
  if (versions.length > 0 && versions.filter((v) => v.storage).length !== 1)
    causes.push({
      reason: "FieldValueInvalid",
      message: "Invalid value: []: must have exactly one version marked as storage version",
      field: "spec.versions",
    });
  versions.forEach((v, i) => {
    if (!v.schema?.openAPIV3Schema) req(`spec.versions[${i}].schema.openAPIV3Schema`);
  });
  if (spec.group && spec.names?.plural && o.metadata.name !== `${spec.names.plural}.${spec.group}`)
    causes.push({
      reason: "FieldValueInvalid",
      message: `Invalid value: "${o.metadata.name ?? ""}": must be spec.names.plural+"."+spec.group`,
      field: "metadata.name",
    });
  return causes;
}

function crdStatus(o: KubeObject): void {
  const spec = o.spec as CrdSpec;
  const now = nowTime();
  const names = {
    ...spec.names,
    singular: spec.names.singular ?? spec.names.kind.toLowerCase(),
    listKind: spec.names.listKind ?? `${spec.names.kind}List`,
  };
  const stored = new Set<string>((o.status as { storedVersions?: string[] } | undefined)?.storedVersions ?? []);
  for (const v of spec.versions) if (v.storage) stored.add(v.name);
  o.status = {
    acceptedNames: names,
    storedVersions: [...stored],
    conditions: [
      {
        type: "NamesAccepted",
        status: "True",
        reason: "NoConflicts",
        message: "no conflicts found",
        lastTransitionTime: now,
      },
      {
        type: "Established",
        status: "True",
        reason: "InitialNamesAccepted",
        message: "the initial names have been accepted",
        lastTransitionTime: now,
      },
    ],
  };
}

/** The CRD strategy: validation and the status the apiextensions controllers would write. */
export const crdStrategy: Strategy = {
  validate: (o) => validateCrd(o),
  prepareCreate: (o) => {
    const f = o.metadata.finalizers ?? [];
    if (!f.includes("customresourcecleanup.apiextensions.k8s.io"))
      o.metadata.finalizers = [...f, "customresourcecleanup.apiextensions.k8s.io"];
    crdStatus(o);
  },
  prepareUpdate: (o, old) => {
    o.status = old.status;
    crdStatus(o);
  },
};

function columnsOf(v: CrdSpec["versions"][number]): PrinterColumn[] {
  const cols = v.additionalPrinterColumns;
  if (!cols) return [AGE];
  return cols.map((c) => ({
    name: c.name,
    type: (["string", "integer", "number", "boolean", "date"].includes(c.type)
      ? c.type
      : "string") as PrinterColumn["type"],
    format: c.format,
    description: c.description ?? c.name,
    priority: c.priority ?? 0,
    jsonPath: c.jsonPath,
  }));
}

/** The served ResourceDef of an established CRD (undefined if it serves no version). */
export function crdToDef(crd: KubeObject): ResourceDef | undefined {
  const spec = crd.spec as CrdSpec;
  const served = spec.versions.filter((v) => v.served);
  if (served.length === 0) return undefined;
  const storage = spec.versions.find((v) => v.storage) ?? served[0];
  const ordered = [storage, ...served.filter((v) => v !== storage)].filter((v) => v.served);
  const preferred = ordered[0] ?? served[0];
  const fields = new Map<string, ReturnType<typeof pathGetter>>();
  for (const f of preferred.selectableFields ?? []) {
    const p = f.jsonPath.replace(/^\./, "");
    fields.set(p, pathGetter(p));
  }
  const schemas = new Map<string, JSONSchemaProps>();
  for (const v of served)
    schemas.set(v.name, v.schema?.openAPIV3Schema ?? { type: "object", "x-kubernetes-preserve-unknown-fields": true });
  // kube-apiserver's default text when a deprecated version names no warning of its own.
  const deprecationWarnings = new Map<string, string>();
  for (const v of served.filter((x) => x.deprecated)) {
    deprecationWarnings.set(v.name, v.deprecationWarning ?? `${spec.group}/${v.name} ${spec.names.kind} is deprecated`);
  }
  const subs: string[] = [];
  if (preferred.subresources?.status) subs.push("status");
  if (preferred.subresources?.scale) subs.push("scale");
  return {
    group: spec.group,
    versions: ordered.map((v) => v.name),
    resource: spec.names.plural,
    kind: spec.names.kind,
    listKind: spec.names.listKind ?? `${spec.names.kind}List`,
    singular: spec.names.singular ?? spec.names.kind.toLowerCase(),
    namespaced: spec.scope === "Namespaced",
    shortNames: spec.names.shortNames ?? [],
    categories: spec.names.categories ?? [],
    verbs: ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
    subresources: subs,
    ...(preferred.subresources?.scale ? { scale: preferred.subresources.scale } : {}),
    columns: columnsOf(preferred),
    fields,
    generation: true,
    unconditionalUpdate: false,
    returnDeletedObject: true,
    custom: true,
    schemas,
    ...(deprecationWarnings.size > 0 ? { deprecationWarnings } : {}),
    strategy: {},
  };
}
