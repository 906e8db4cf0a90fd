/**
 * Structural-schema processing for custom resources (apiextensions-apiserver): in one walk over the object,
 * unknown fields are pruned (and reported, for fieldValidation=Strict/Warn), defaults are applied, and values are
 * validated against type, enum, required, bounds and patterns. The root's apiVersion/kind/metadata are the
 * server's business and skipped here.
 */
import type { StatusCause } from "../errors.ts";
import { isObject, type Json, type JsonObject } from "../types.ts";

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

function walk(s: JSONSchemaProps, v: Json, path: string, out: SchemaResult, root: boolean): void {
  if (v === null) {
    if (!s.nullable && s.type)
      out.causes.push({
        reason: "FieldValueInvalid",
        message: `Invalid value: "null": ${path} in body must be of type ${s.type}: "null"`,
        field: path,
      });
    return;
  }
  if (!typeMatches(s, v)) {
    const expected = s["x-kubernetes-int-or-string"] ? "integer or string" : (s.type as string);
    out.causes.push({
      reason: "FieldValueTypeInvalid",
      message: `Invalid value: "${typeOf(v)}": ${path} in body must be of type ${expected}: "${typeOf(v)}"`,
      field: path,
    });
    return;
  }
  if (s.enum && !s.enum.some((e) => JSON.stringify(e) === JSON.stringify(v))) {
    const allowed = s.enum.map((e) => JSON.stringify(e)).join(", ");
    out.causes.push({
      reason: "FieldValueNotSupported",
      message: `Unsupported value: ${JSON.stringify(v)}: supported values: ${allowed}`,
      field: path,
    });
  }
  if (typeof v === "number") {
    if (s.minimum !== undefined && v < s.minimum)
      out.causes.push({
        reason: "FieldValueInvalid",
        message: `Invalid value: ${v}: ${path} in body should be greater than or equal to ${s.minimum}`,
        field: path,
      });
    if (s.maximum !== undefined && v > s.maximum)
      out.causes.push({
        reason: "FieldValueInvalid",
        message: `Invalid value: ${v}: ${path} in body should be less than or equal to ${s.maximum}`,
        field: path,
      });
  }
  if (typeof v === "string") {
    if (s.minLength !== undefined && v.length < s.minLength)
      out.causes.push({
        reason: "FieldValueInvalid",
        message: `Invalid value: "${v}": ${path} in body should be at least ${s.minLength} chars long`,
        field: path,
      });
    if (s.maxLength !== undefined && v.length > s.maxLength)
      out.causes.push({
        reason: "FieldValueTooLong",
        message: `Too long: may not be more than ${s.maxLength} bytes`,
        field: path,
      });
    if (s.pattern && !new RegExp(s.pattern, "u").test(v))
      out.causes.push({
        reason: "FieldValueInvalid",
        message: `Invalid value: "${v}": ${path} in body should match '${s.pattern}'`,
        field: path,
      });
  }
  if (Array.isArray(v)) {
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
    if (s.items) for (const [i, item] of v.entries()) walk(s.items, item, `${path}[${i}]`, out, false);
    return;
  }
  if (isObject(v)) walkObject(s, v, path, out, root);
}

function walkObject(s: JSONSchemaProps, v: JsonObject, path: string, out: SchemaResult, root: boolean): void {
  const props = s.properties ?? {};
  const embedded = root || s["x-kubernetes-embedded-resource"] === true;
  for (const [k, ps] of Object.entries(props)) {
    if (v[k] === undefined && ps.default !== undefined) v[k] = structuredClone(ps.default);
  }
  for (const k of Object.keys(v)) {
    if (embedded && (k === "apiVersion" || k === "kind" || k === "metadata")) continue;
    const child = v[k];
    const ps = props[k];
    if (ps) {
      walk(ps, child, join(path, k), out, false);
    } else if (isObject(s.additionalProperties)) {
      walk(s.additionalProperties, child, join(path, k), out, false);
    } else if (!s["x-kubernetes-preserve-unknown-fields"] && s.additionalProperties !== true) {
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
