/**
 * Structural-schema processing for custom resources (apiextensions-apiserver): in one walk over the object,
 * unknown fields are pruned (and reported, for fieldValidation=Strict/Warn), defaults are applied, and values are
 * validated against type, enum, required, bounds and patterns. The root's apiVersion/kind/metadata are the
 * server's business and skipped here.
 */
import type { StatusCause } from "../errors.ts";
import { cloneJson, isObject, type Json, type JsonObject } from "../types.ts";

/** The subset of JSONSchemaProps (apiextensions.k8s.io/v1) the server interprets. */
export interface JSONSchemaProps {
  type?: string;
  description?: string;
  properties?: Record<string, JSONSchemaProps>;
  additionalProperties?: JSONSchemaProps | boolean;
  items?: JSONSchemaProps;
  required?: string[];
  enum?: Json[];
  default?: Json;
  nullable?: boolean;
  format?: string;
  pattern?: string;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  "x-kubernetes-preserve-unknown-fields"?: boolean;
  "x-kubernetes-int-or-string"?: boolean;
  "x-kubernetes-embedded-resource"?: boolean;
  [key: string]: unknown;
}

/** What a schema pass found. */
export interface SchemaResult {
  /** Paths of pruned unknown fields (`spec.foo`). */
  readonly unknown: string[];
  /** Validation failures. */
  readonly causes: StatusCause[];
}

function typeOf(v: Json): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
}

function typeMatches(s: JSONSchemaProps, v: Json): boolean {
  if (s["x-kubernetes-int-or-string"]) return typeof v === "string" || (typeof v === "number" && Number.isInteger(v));
  if (!s.type) return true;
  const t = typeOf(v);
  if (s.type === "number") return t === "number" || t === "integer";
  return t === s.type;
}

function join(path: string, key: string): string {
  return path ? `${path}.${key}` : key;
}

/** The path of a child: `parent.key`, or `parent[i]` for an array item. Built only when needed (errors, containers). */
function pathOf(parent: string, key: string | number): string {
  return typeof key === "number" ? `${parent}[${key}]` : join(parent, key);
}

/** Per-schema facts computed once (schemas are immutable once a resource is registered). */
interface Compiled {
  /** Properties with a default. */
  readonly defaults: readonly (readonly [string, Json])[];
  /** The enum values, serialized, and as listed in an error. */
  readonly enumJson: ReadonlySet<string> | undefined;
  readonly enumAllowed: string;
  readonly pattern: RegExp | undefined;
}

const compiled = new WeakMap<JSONSchemaProps, Compiled>();

function compile(s: JSONSchemaProps): Compiled {
  let c = compiled.get(s);
  if (!c) {
    const defaults: [string, Json][] = [];
    for (const [k, ps] of Object.entries(s.properties ?? {}))
      if (ps.default !== undefined) defaults.push([k, ps.default]);
    c = {
      defaults,
      enumJson: s.enum ? new Set(s.enum.map((e) => JSON.stringify(e))) : undefined,
      enumAllowed: (s.enum ?? []).map((e) => JSON.stringify(e)).join(", "),
      pattern: s.pattern ? new RegExp(s.pattern, "u") : undefined,
    };
    compiled.set(s, c);
  }
  return c;
}

function walk(s: JSONSchemaProps, v: Json, parent: string, key: string | number, out: SchemaResult): void {
  if (v === null) {
    if (!s.nullable && s.type) {
      const path = pathOf(parent, key);
      out.causes.push({
        reason: "FieldValueInvalid",
        message: `Invalid value: "null": ${path} in body must be of type ${s.type}: "null"`,
        field: path,
      });
    }
    return;
  }
  if (!typeMatches(s, v)) {
    const path = pathOf(parent, key);
    const expected = s["x-kubernetes-int-or-string"] ? "integer or string" : (s.type as string);
    out.causes.push({
      reason: "FieldValueTypeInvalid",
      message: `Invalid value: "${typeOf(v)}": ${path} in body must be of type ${expected}: "${typeOf(v)}"`,
      field: path,
    });
    return;
  }
  const c = compile(s);
  if (c.enumJson && !c.enumJson.has(JSON.stringify(v))) {
    out.causes.push({
      reason: "FieldValueNotSupported",
      message: `Unsupported value: ${JSON.stringify(v)}: supported values: ${c.enumAllowed}`,
      field: pathOf(parent, key),
    });
  }
  if (typeof v === "number") checkNumber(s, v, parent, key, out);
  else if (typeof v === "string") checkString(s, c, v, parent, key, out);
  else if (Array.isArray(v)) walkArray(s, v, pathOf(parent, key), out);
  else if (isObject(v)) walkObject(s, v, pathOf(parent, key), out, false);
}

function checkNumber(s: JSONSchemaProps, v: number, parent: string, key: string | number, out: SchemaResult): void {
  if (s.minimum !== undefined && v < s.minimum) {
    const path = pathOf(parent, key);
    out.causes.push({
      reason: "FieldValueInvalid",
      message: `Invalid value: ${v}: ${path} in body should be greater than or equal to ${s.minimum}`,
      field: path,
    });
  }
  if (s.maximum !== undefined && v > s.maximum) {
    const path = pathOf(parent, key);
    out.causes.push({
      reason: "FieldValueInvalid",
      message: `Invalid value: ${v}: ${path} in body should be less than or equal to ${s.maximum}`,
      field: path,
    });
  }
}

function checkString(
  s: JSONSchemaProps,
  c: Compiled,
  v: string,
  parent: string,
  key: string | number,
  out: SchemaResult,
): void {
  if (s.minLength !== undefined && v.length < s.minLength) {
    const path = pathOf(parent, key);
    out.causes.push({
      reason: "FieldValueInvalid",
      message: `Invalid value: "${v}": ${path} in body should be at least ${s.minLength} chars long`,
      field: path,
    });
  }
  if (s.maxLength !== undefined && v.length > s.maxLength)
    out.causes.push({
      reason: "FieldValueTooLong",
      message: `Too long: may not be more than ${s.maxLength} bytes`,
      field: pathOf(parent, key),
    });
  if (c.pattern && !c.pattern.test(v)) {
    const path = pathOf(parent, key);
    out.causes.push({
      reason: "FieldValueInvalid",
      message: `Invalid value: "${v}": ${path} in body should match '${s.pattern}'`,
      field: path,
    });
  }
}

function walkArray(s: JSONSchemaProps, v: Json[], path: string, out: SchemaResult): void {
  if (s.minItems !== undefined && v.length < s.minItems)
    out.causes.push({
      reason: "FieldValueInvalid",
      message: `Invalid value: ${v.length}: ${path} in body should have at least ${s.minItems} items`,
      field: path,
    });
  if (s.maxItems !== undefined && v.length > s.maxItems)
    out.causes.push({
      reason: "FieldValueTooMany",
      message: `Too many: ${v.length}: must have at most ${s.maxItems} items`,
      field: path,
    });
  if (s.items) for (let i = 0; i < v.length; i++) walk(s.items, v[i], path, i, out);
}

function walkObject(s: JSONSchemaProps, v: JsonObject, path: string, out: SchemaResult, root: boolean): void {
  const props = s.properties;
  const embedded = root || s["x-kubernetes-embedded-resource"] === true;
  // As kube-apiserver (PruneNonNullableNullsWithoutDefaults): a null in a property that is not nullable is pruned
  // before defaulting, so it gets its default or goes away; it is never stored (found by the API fuzz lane: a
  // null int-or-string status field was stored and then refused by strict decoding).
  if (props !== undefined)
    for (const k in v) if (v[k] === null && Object.hasOwn(props, k) && props[k].nullable !== true) delete v[k];
  const { defaults } = compile(s);
  for (let i = 0; i < defaults.length; i++) {
    const [k, d] = defaults[i];
    if (v[k] === undefined) v[k] = cloneJson(d);
  }
  const additional = isObject(s.additionalProperties) ? s.additionalProperties : undefined;
  const keepUnknown = s["x-kubernetes-preserve-unknown-fields"] === true || s.additionalProperties === true;
  // for-in (no key array); deleting the key being visited is allowed.
  for (const k in v) {
    if (!Object.hasOwn(v, k) || (embedded && (k === "apiVersion" || k === "kind" || k === "metadata"))) continue;
    const ps = props !== undefined && Object.hasOwn(props, k) ? props[k] : additional;
    if (ps) walk(ps, v[k], path, k, out);
    else if (!keepUnknown) {
      out.unknown.push(join(path, k));
      delete v[k];
    }
  }
  for (const r of s.required ?? []) {
    if (v[r] === undefined)
      out.causes.push({ reason: "FieldValueRequired", message: "Required value", field: join(path, r) });
  }
}

/** Prunes, defaults and validates `obj` (in place) against the root schema. */
export function applySchema(schema: JSONSchemaProps, obj: JsonObject): SchemaResult {
  const out: SchemaResult = { unknown: [], causes: [] };
  walkObject(schema, obj, "", out, true);
  return out;
}

/** The fields of ObjectMeta a client may send; anything else under metadata is an unknown field. */
export const OBJECT_META_FIELDS: ReadonlySet<string> = new Set([
  "name",
  "generateName",
  "namespace",
  "selfLink",
  "uid",
  "resourceVersion",
  "generation",
  "creationTimestamp",
  "deletionTimestamp",
  "deletionGracePeriodSeconds",
  "labels",
  "annotations",
  "ownerReferences",
  "finalizers",
  "managedFields",
]);
