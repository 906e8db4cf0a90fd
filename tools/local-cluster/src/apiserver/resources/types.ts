/** The description of one served resource (a built-in or a CRD), which every layer of the server reads. */
import type { Authorizer, AuthUser } from "../auth/rbac.ts";
import type { StatusCause } from "../errors.ts";
import type { FieldGetter } from "../selectors/fields.ts";
import type { Json, KubeObject } from "../types.ts";
import type { JSONSchemaProps } from "./schema.ts";

/** A Table column (metav1.TableColumnDefinition plus how to compute the cell). */
export interface PrinterColumn {
  readonly name: string;
  readonly type: "string" | "integer" | "number" | "boolean" | "date";
  readonly format?: string;
  readonly description: string;
  readonly priority: number;
  /** A JSONPath (CRD additionalPrinterColumns). */
  readonly jsonPath?: string;
  /** A computed cell (built-in printers). */
  readonly render?: (obj: KubeObject, now: number) => Json;
}

/** Per-resource hooks, like a generic registry strategy. */
export interface Strategy {
  /**
   * Keep the status a create sends although the kind has a status subresource (kube's node strategy: a kubelet
   * registers its Node with capacity, allocatable and addresses). Other kinds drop it, as their PrepareForCreate does.
   */
  readonly statusOnCreate?: boolean;
  /**
   * What kube-apiserver's decoding does to every write of the kind, its status subresource's included (a
   * `resource.Quantity` is stored in its canonical form). Throws the 400 of a value that does not decode.
   */
  decode?(obj: KubeObject): void;
  /** Called on create after metadata defaults; may set status etc. */
  prepareCreate?(obj: KubeObject): void;
  /** Called on update with the old object. */
  prepareUpdate?(obj: KubeObject, old: KubeObject): void;
  /** Extra validation; returns causes. */
  validate?(obj: KubeObject, old: KubeObject | undefined): StatusCause[];
  /**
   * A create-only review resource (e.g. SelfSubjectAccessReview): answers POST from the request, stores nothing.
   */
  review?(obj: KubeObject, user: AuthUser, authorizer: Authorizer): KubeObject;
  /** Default grace period for a delete without one (pods: terminationGracePeriodSeconds). */
  gracePeriod?(obj: KubeObject): number;
}

/** Where a custom resource keeps what its scale subresource shows (CRD `subresources.scale`). */
export interface ScaleSpec {
  readonly specReplicasPath: string;
  readonly statusReplicasPath: string;
  readonly labelSelectorPath?: string;
}

/** A served resource. */
export interface ResourceDef {
  readonly group: string;
  /** Served versions; the first is preferred (and the storage version). */
  readonly versions: readonly string[];
  readonly resource: string;
  readonly kind: string;
  readonly listKind: string;
  readonly singular: string;
  readonly namespaced: boolean;
  readonly shortNames: readonly string[];
  readonly categories: readonly string[];
  readonly verbs: readonly string[];
  /** Subresource names (`status`, `binding`, `eviction`, `log`, ...). */
  readonly subresources: readonly string[];
  /** The paths of the scale subresource (custom resources whose CRD declares one). */
  readonly scale?: ScaleSpec;
  /** Additional Table columns after Name. */
  readonly columns: readonly PrinterColumn[];
  /** Selectable fields besides metadata.name / metadata.namespace. */
  readonly fields: ReadonlyMap<string, FieldGetter>;
  /** metadata.generation is maintained. */
  readonly generation: boolean;
  /** PUT without resourceVersion is allowed. */
  readonly unconditionalUpdate: boolean;
  /** DELETE answers with the deleted object (else a Success Status). */
  readonly returnDeletedObject: boolean;
  /** A custom resource (strategic merge patch is 415). */
  readonly custom: boolean;
  /** The warning each deprecated served version earns its requests (CRD `deprecated` / `deprecationWarning`). */
  readonly deprecationWarnings?: ReadonlyMap<string, string>;
  /** Structural schema per version (CRDs; built-ins get a permissive one). */
  readonly schemas: ReadonlyMap<string, JSONSchemaProps>;
  readonly strategy: Strategy;
  /** The Name cell of a Table row (default: metadata.name; StorageClasses add ` (default)`). */
  readonly nameCell?: (obj: KubeObject) => string;
  /** The Table has no leading Name column (core Events print it last, at priority 1). */
  readonly omitNameColumn?: boolean;
  /** Names must be DNS-1123 labels (namespaces) rather than subdomains. */
  readonly nameIsLabel?: boolean;
}

/** Storage collection of a resource. */
export function collOf(def: Pick<ResourceDef, "group" | "resource">): string {
  return `${def.group || "core"}/${def.resource}`;
}

/** Storage id of an object. */
export function idOf(def: Pick<ResourceDef, "namespaced">, namespace: string | undefined, name: string): string {
  return def.namespaced ? `${namespace ?? ""}/${name}` : name;
}

/** `group/version` or `version` for core. */
export function groupVersion(group: string, version: string): string {
  return group ? `${group}/${version}` : version;
}
