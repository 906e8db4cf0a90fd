/**
 * OpenAPI v3, generated from the registry: `/openapi/v3` lists one document per group-version with a content
 * hash; each document has the resource paths (the PATCH operation tagged with x-kubernetes-group-version-kind and
 * the `fieldValidation` parameter, which is what makes kubectl send `fieldValidation=Strict` and skip its
 * client-side validation) and `components.schemas` for `kubectl explain`. `/openapi/v2` is derived from these
 * (openapi-v2.ts).
 */
import { createHash } from "node:crypto";
import type { ResourceRegistry } from "../resources/registry.ts";
import type { ResourceDef } from "../resources/types.ts";
import type { Json } from "../types.ts";
import { OpenApiV2 } from "./openapi-v2.ts";

const OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

const OBJECT_META_SCHEMA: Json = {
  type: "object",
  description:
    "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.",
  properties: {
    name: { type: "string", description: "Name must be unique within a namespace." },
    generateName: {
      type: "string",
      description:
        "GenerateName is an optional prefix, used by the server, to generate a unique name ONLY IF the Name field has not been provided.",
    },
    namespace: { type: "string", description: "Namespace defines the space within which each name must be unique." },
    uid: { type: "string", description: "UID is the unique in time and space value for this object." },
    resourceVersion: {
      type: "string",
      description: "An opaque value that represents the internal version of this object.",
    },
    generation: {
      type: "integer",
      format: "int64",
      description: "A sequence number representing a specific generation of the desired state.",
    },
    creationTimestamp: {
      type: "string",
      format: "date-time",
      description: "CreationTimestamp is a timestamp representing the server time when this object was created.",
    },
    deletionTimestamp: {
      type: "string",
      format: "date-time",
      description: "DeletionTimestamp is RFC 3339 date and time at which this resource will be deleted.",
    },
    deletionGracePeriodSeconds: {
      type: "integer",
      format: "int64",
      description: "Number of seconds allowed for this object to gracefully terminate.",
    },
    labels: {
      type: "object",
      additionalProperties: { type: "string" },
      description: "Map of string keys and values that can be used to organize and categorize objects.",
    },
    annotations: {
      type: "object",
      additionalProperties: { type: "string" },
      description: "Annotations is an unstructured key value map.",
    },
    finalizers: {
      type: "array",
      items: { type: "string" },
      description: "Must be empty before the object is deleted from the registry.",
    },
    ownerReferences: {
      type: "array",
      items: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
      description: "List of objects depended by this object.",
    },
    managedFields: {
      type: "array",
      items: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
      description: "ManagedFields maps workflow-id and version to the set of fields that are managed by that workflow.",
    },
  },
};

/** The components.schemas name of a kind (`io.kubevirt.v1.VirtualMachineInstance`, `io.k8s.api.core.v1.Pod`). */
export function schemaName(group: string, version: string, kind: string): string {
  if (group === "") return `io.k8s.api.core.${version}.${kind}`;
  if (!group.includes(".") || group.endsWith(".k8s.io")) {
    const short = group.replace(/\.k8s\.io$/, "").replace(/\.authorization$/, "");
    const pkg =
      group === "apiextensions.k8s.io"
        ? "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions"
        : group === "apiregistration.k8s.io"
          ? "io.k8s.kube-aggregator.pkg.apis.apiregistration"
          : `io.k8s.api.${short}`;
    return `${pkg}.${version}.${kind}`;
  }
  return `${group.split(".").reverse().join(".")}.${version}.${kind}`;
}

function objectSchema(d: ResourceDef, version: string): Json {
  const base = d.schemas.get(version) ?? { type: "object" };
  const properties: Record<string, Json> = {
    apiVersion: {
      type: "string",
      description: "APIVersion defines the versioned schema of this representation of an object.",
    },
    kind: {
      type: "string",
      description: "Kind is a string value representing the REST resource this object represents.",
    },
    ...((base.properties ?? {}) as Record<string, Json>),
    metadata: {
      allOf: [{ $ref: `#/components/schemas/${OBJECT_META}` }],
      default: {},
      description: "Standard object's metadata.",
    },
  };
  return {
    ...(structuredClone(base) as Record<string, Json>),
    type: "object",
    description: base.description ?? `${d.kind} is the Schema for the ${d.resource} API.`,
    properties,
    "x-kubernetes-group-version-kind": [{ group: d.group, kind: d.kind, version }],
  };
}

const PARAM_FIELD_VALIDATION: Json = {
  name: "fieldValidation",
  in: "query",
  description:
    "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields.",
  schema: { type: "string", uniqueItems: true },
};

function paths(d: ResourceDef, version: string): Record<string, Json> {
  const prefix = d.group === "" ? `/api/${version}` : `/apis/${d.group}/${version}`;
  const coll = d.namespaced ? `${prefix}/namespaces/{namespace}/${d.resource}` : `${prefix}/${d.resource}`;
  const gvk = { group: d.group, version, kind: d.kind };
  const ref = { $ref: `#/components/schemas/${schemaName(d.group, version, d.kind)}` };
  const ok = { "200": { description: "OK", content: { "application/json": { schema: ref } } } };
  const op = (action: string, extra: Record<string, Json> = {}): Json => ({
    "x-kubernetes-action": action,
    "x-kubernetes-group-version-kind": gvk,
    responses: ok,
    ...extra,
  });
  const out: Record<string, Json> = {
    [coll]: { get: op("list"), post: op("post", { parameters: [PARAM_FIELD_VALIDATION] }) },
    [`${coll}/{name}`]: {
      get: op("get"),
      put: op("put", { parameters: [PARAM_FIELD_VALIDATION] }),
      patch: op("patch", { parameters: [PARAM_FIELD_VALIDATION] }),
      delete: op("delete"),
    },
  };
  if (d.subresources.includes("status"))
    out[`${coll}/{name}/status`] = {
      get: op("get"),
      put: op("put", { parameters: [PARAM_FIELD_VALIDATION] }),
      patch: op("patch", { parameters: [PARAM_FIELD_VALIDATION] }),
    };
  return out;
}

/** A generated OpenAPI v3 document and its hash. */
export interface OpenApiDoc {
  readonly body: string;
  readonly hash: string;
}

/** Builds and caches the documents; rebuilt when the registry changes. */
export class OpenApiV3 {
  readonly #registry: ResourceRegistry;
  #cacheGen = -1;
  #docs = new Map<string, OpenApiDoc>();

  #v2: OpenApiV2 | undefined;

  constructor(registry: ResourceRegistry) {
    this.#registry = registry;
  }

  /** The Swagger 2.0 view of these documents (`/openapi/v2`). */
  v2(): OpenApiV2 {
    this.#v2 ??= new OpenApiV2(this);
    return this.#v2;
  }

  #rebuild(): void {
    if (this.#cacheGen === this.#registry.generation) return;
    const byGv = new Map<string, ResourceDef[]>();
    for (const d of this.#registry.all())
      for (const v of d.versions) {
        const key = d.group === "" ? `api/${v}` : `apis/${d.group}/${v}`;
        byGv.set(key, [...(byGv.get(key) ?? []), d]);
      }
    const docs = new Map<string, OpenApiDoc>();
    for (const [key, defs] of byGv) {
      const version = key.split("/").pop() as string;
      const schemas: Record<string, Json> = { [OBJECT_META]: OBJECT_META_SCHEMA };
      let allPaths: Record<string, Json> = {};
      for (const d of defs) {
        schemas[schemaName(d.group, version, d.kind)] = objectSchema(d, version);
        allPaths = { ...allPaths, ...paths(d, version) };
      }
      const body = JSON.stringify({
        openapi: "3.0.0",
        info: { title: "Kubernetes", version: "v1.32.0" },
        paths: allPaths,
        components: { schemas },
      });
      docs.set(key, { body, hash: createHash("sha512").update(body).digest("hex").slice(0, 128).toUpperCase() });
    }
    this.#docs = docs;
    this.#cacheGen = this.#registry.generation;
  }

  /** The `/openapi/v3` index. */
  index(): string {
    this.#rebuild();
    const p: Record<string, Json> = {};
    for (const [key, doc] of this.#docs) p[key] = { serverRelativeURL: `/openapi/v3/${key}?hash=${doc.hash}` };
    return JSON.stringify({ paths: p });
  }

  /** Every document by key; the same map until the registry changes (OpenApiV2 rebuilds when it does not). */
  documents(): ReadonlyMap<string, OpenApiDoc> {
    this.#rebuild();
    return this.#docs;
  }

  /** The document at `api/v1` or `apis/<g>/<v>`. */
  doc(key: string): OpenApiDoc | undefined {
    this.#rebuild();
    return this.#docs.get(key);
  }
}
