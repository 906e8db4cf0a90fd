/**
 * How each field of an object merges and is tracked under server-side apply, as structured-merge-diff reads it from
 * a schema: scalars and atomic values are leaves; objects are structs (declared fields) or maps (every key its own
 * field); lists are atomic, sets (`v:` items) or associative lists keyed by their map keys (`k:` items).
 *
 * Custom resources take this from their CRD's structural schema (`x-kubernetes-list-type`,
 * `x-kubernetes-list-map-keys`, `x-kubernetes-map-type`, `properties`/`additionalProperties`; an untyped part is
 * deduced: objects are maps, lists atomic). Built-in kinds have only permissive schemas here, so they use the
 * list-map keys and map-typed fields of the Kubernetes types the server serves (a table by field name).
 */
import type { JSONSchemaProps } from "../resources/schema.ts";
import { isObject, type Json } from "../types.ts";

/** The list semantics of a granular list. */
export interface ListInfo {
  readonly type: "set" | "map";
  /** Map keys (associative lists). */
  readonly keys: readonly string[];
  /** Defaults of key fields an item may omit (`protocol: TCP` for ports). */
  readonly keyDefaults: Readonly<Record<string, Json>>;
}

/** The type of one value position. */
export interface FieldType {
  /** True if `v` is tracked and replaced as a whole here. */
  atomic(v: Json): boolean;
  /** The type of field `key` of an object here. */
  field(key: string): FieldType;
  /** True if `key` is a declared struct field (false for map keys). */
  declared(key: string): boolean;
  /** The list semantics of `v` here (undefined: atomic). */
  list(v: Json[]): ListInfo | undefined;
  /** The type of the items of a list here. */
  item(): FieldType;
}

/** Built-in associative lists by field name (Kubernetes' `listType=map` / patch merge keys). */
const BUILTIN_LIST_KEYS: Readonly<Record<string, readonly string[]>> = {
  containers: ["name"],
  initContainers: ["name"],
  ephemeralContainers: ["name"],
  volumes: ["name"],
  env: ["name"],
  volumeMounts: ["mountPath"],
  volumeDevices: ["devicePath"],
  conditions: ["type"],
  imagePullSecrets: ["name"],
  hostAliases: ["ip"],
  topologySpreadConstraints: ["topologyKey", "whenUnsatisfiable"],
  ownerReferences: ["uid"],
  resourceClaims: ["name"],
  containerStatuses: ["name"],
  initContainerStatuses: ["name"],
};

/** Built-in sets of scalars. */
const BUILTIN_SETS: ReadonlySet<string> = new Set(["finalizers"]);

/** Built-in fields that are maps (each key its own field) rather than structs. */
const BUILTIN_MAPS: ReadonlySet<string> = new Set([
  "labels",
  "annotations",
  "nodeSelector",
  "data",
  "binaryData",
  "stringData",
  "matchLabels",
  "limits",
  "requests",
  "capacity",
  "allocatable",
  "parameters",
  "hard",
  "used",
  "overhead",
  "volumeAttributes",
]);

/** Built-in label selectors (metav1.LabelSelector is `structType=atomic`). */
const SELECTOR_FIELDS: ReadonlySet<string> = new Set(["selector", "labelSelector", "namespaceSelector"]);

function isLabelSelector(v: Json): boolean {
  return isObject(v) && (Object.hasOwn(v, "matchLabels") || Object.hasOwn(v, "matchExpressions"));
}

const PORT_DEFAULTS = { protocol: "TCP" } as const;

class BuiltinType implements FieldType {
  readonly #name: string;
  constructor(name: string) {
    this.#name = name;
  }
  atomic(v: Json): boolean {
    if (!isObject(v) && !Array.isArray(v)) return true;
    if (isObject(v)) return SELECTOR_FIELDS.has(this.#name) && isLabelSelector(v);
    return this.list(v) === undefined;
  }
  field(key: string): FieldType {
    return key === "managedFields" ? ATOMIC : new BuiltinType(key);
  }
  declared(): boolean {
    // A selector that is not a LabelSelector is a Service's map of labels.
    return !BUILTIN_MAPS.has(this.#name) && this.#name !== "selector";
  }
  list(v: Json[]): ListInfo | undefined {
    if (BUILTIN_SETS.has(this.#name)) return { type: "set", keys: [], keyDefaults: {} };
    if (this.#name === "ports") {
      // Container ports key on containerPort+protocol, service ports on port+protocol.
      const container = v.some((p) => isObject(p) && p.containerPort !== undefined);
      return { type: "map", keys: [container ? "containerPort" : "port", "protocol"], keyDefaults: PORT_DEFAULTS };
    }
    const keys = Object.hasOwn(BUILTIN_LIST_KEYS, this.#name) ? BUILTIN_LIST_KEYS[this.#name] : undefined;
    return keys ? { type: "map", keys, keyDefaults: {} } : undefined;
  }
  item(): FieldType {
    return new BuiltinType(`${this.#name}[]`);
  }
}

class AtomicType implements FieldType {
  atomic(): boolean {
    return true;
  }
  field(): FieldType {
    return this;
  }
  declared(): boolean {
    return false;
  }
  list(): ListInfo | undefined {
    return undefined;
  }
  item(): FieldType {
    return this;
  }
}

const ATOMIC = new AtomicType();

/** An untyped position (structured-merge-diff's deduced type): objects are maps, lists atomic. */
class DeducedType implements FieldType {
  atomic(v: Json): boolean {
    return !isObject(v);
  }
  field(): FieldType {
    return this;
  }
  declared(): boolean {
    return false;
  }
  list(): ListInfo | undefined {
    return undefined;
  }
  item(): FieldType {
    return this;
  }
}

const DEDUCED = new DeducedType();

class SchemaType implements FieldType {
  readonly #s: JSONSchemaProps;
  constructor(s: JSONSchemaProps) {
    this.#s = s;
  }
  atomic(v: Json): boolean {
    if (isObject(v)) return this.#s["x-kubernetes-map-type"] === "atomic";
    if (Array.isArray(v)) return this.list() === undefined;
    return true;
  }
  field(key: string): FieldType {
    const s = this.#s;
    if (s["x-kubernetes-embedded-resource"] === true && key === "metadata") return new BuiltinType("metadata");
    if (s.properties !== undefined && Object.hasOwn(s.properties, key)) return new SchemaType(s.properties[key]);
    if (isObject(s.additionalProperties)) return new SchemaType(s.additionalProperties);
    return DEDUCED;
  }
  declared(key: string): boolean {
    return this.#s.properties !== undefined && Object.hasOwn(this.#s.properties, key);
  }
  list(): ListInfo | undefined {
    const t = this.#s["x-kubernetes-list-type"];
    if (t === "set") return { type: "set", keys: [], keyDefaults: {} };
    if (t !== "map") return undefined;
    const keys = (this.#s["x-kubernetes-list-map-keys"] as string[] | undefined) ?? [];
    const keyDefaults: Record<string, Json> = {};
    for (const k of keys) {
      const props = this.#s.items?.properties;
      const d = props !== undefined && Object.hasOwn(props, k) ? props[k].default : undefined;
      if (d !== undefined) Object.defineProperty(keyDefaults, k, { value: d, enumerable: true });
    }
    return { type: "map", keys, keyDefaults };
  }
  item(): FieldType {
    return this.#s.items ? new SchemaType(this.#s.items) : DEDUCED;
  }
}

/** The root type of a custom resource with this schema (ObjectMeta typed as Kubernetes types it). */
class CustomRootType extends SchemaType {
  override field(key: string): FieldType {
    return key === "metadata" ? new BuiltinType("metadata") : super.field(key);
  }
  override declared(key: string): boolean {
    return key === "apiVersion" || key === "kind" || key === "metadata" || super.declared(key);
  }
}

/** The root type of a served kind: its CRD schema, or the built-in table. */
export function rootType(schema: JSONSchemaProps | undefined, custom: boolean): FieldType {
  if (!custom) return new BuiltinType("");
  return new CustomRootType(schema ?? { type: "object", "x-kubernetes-preserve-unknown-fields": true });
}
