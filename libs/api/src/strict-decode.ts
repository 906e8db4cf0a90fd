/**
 * Strict decoding against the structural schemas, as the API server does with `fieldValidation=Strict`:
 * unknown fields are reported by their full path (`spec.template.spec.domain.devices.disks[0].foo`) and values of
 * the wrong JSON type are reported with the API server's wording. Subtrees marked
 * `x-kubernetes-preserve-unknown-fields` are taken as they are.
 *
 * ```
 *   decodeStrict("VirtualMachine", body)
 *     -> { unknownFields: ["spec.foo"], causes: [{type:"FieldValueUnknown"...}, {type:"FieldValueTypeInvalid"...}] }
 *   strictDecodingMessage(unknownFields) -> 'strict decoding error: unknown field "spec.foo"'
 * ```
 */
import { customResourceDefinitions } from "./crds/crds.ts";
import type { JsonSchema } from "./schema/builder.ts";
import type { ValidationCause } from "./types.ts";

/** The outcome of a strict decode. */
export interface StrictDecodeResult {
  /** Paths of fields the schema does not know, in document order. */
  unknownFields: string[];
  /** One cause per unknown field ("FieldValueUnknown") and per wrongly typed value ("FieldValueTypeInvalid"). */
  causes: ValidationCause[];
}

// The CRD form of each schema: root metadata is left to the API server, template metadata keeps unknown fields.
// Built on first use: a process that never decodes (virt-launcher) does not pay for building every CRD.
let schemas: Record<string, JsonSchema> | undefined;
function schemaOf(kind: string): JsonSchema | undefined {
  schemas ??= Object.fromEntries(
    customResourceDefinitions().map((c) => [c.spec.names.kind, c.spec.versions[0]?.schema.openAPIV3Schema ?? {}]),
  );
  return schemas[kind];
}

function jsonType(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
}

function typeMatches(s: JsonSchema, v: unknown): boolean {
  if (v === null) return s.nullable === true;
  const t = jsonType(v);
  if (s["x-kubernetes-int-or-string"]) return t === "integer" || t === "string";
  if (!s.type) return true;
  if (s.type === "number") return t === "number" || t === "integer";
  return s.type === t;
}

function walk(s: JsonSchema, v: unknown, at: string, out: StrictDecodeResult): void {
  if (v === undefined) return;
  if (!typeMatches(s, v)) {
    const shown = typeof v === "string" ? v : jsonType(v);
    const want = s["x-kubernetes-int-or-string"] ? "integer or string" : (s.type ?? "object");
    out.causes.push({
      type: "FieldValueTypeInvalid",
      message: `Invalid value: "${shown}": ${at} in body must be of type ${want}: "${jsonType(v)}"`,
      field: at,
    });
    return;
  }
  const preserve = s["x-kubernetes-preserve-unknown-fields"] === true;
  if (v === null || (preserve && !s.properties)) return;
  if (Array.isArray(v)) {
    const items = s.items;
    if (items) {
      v.forEach((item, i) => {
        walk(items, item, `${at}[${i}]`, out);
      });
    }
    return;
  }
  // The root metadata is ObjectMeta, which the API server decodes by its own rules.
  if (typeof v !== "object" || at === "metadata") return;
  for (const [k, child] of Object.entries(v as Record<string, unknown>)) {
    const childPath = at ? `${at}.${k}` : k;
    const childSchema = s.properties?.[k] ?? s.additionalProperties;
    if (childSchema) walk(childSchema, child, childPath, out);
    else if (!preserve) {
      out.unknownFields.push(childPath);
      out.causes.push({ type: "FieldValueUnknown", message: `unknown field "${childPath}"`, field: childPath });
    }
  }
}

/** Decodes `obj` strictly against `schema`. */
export function decodeStrictWith(schema: JsonSchema, obj: unknown): StrictDecodeResult {
  const out: StrictDecodeResult = { unknownFields: [], causes: [] };
  walk(schema, obj, "", out);
  return out;
}

/**
 * Decodes a VM, VMI, VMIM or MigrationPolicy strictly (metadata is left to the API server's own ObjectMeta rules).
 * Throws a TypeError for a kind this API does not define.
 */
export function decodeStrict(kind: string, obj: unknown): StrictDecodeResult {
  const schema = schemaOf(kind);
  if (!schema) throw new TypeError(`Cannot decode kind "${kind}": not a kubevirt.io kind`);
  return decodeStrictWith(schema, obj);
}

/**
 * Only the wrongly typed values of `obj` (as kind `kind`): what validation and defaulting check first, so that a
 * malformed object is refused with a cause instead of tripping over a string where a list belongs.
 */
export function typeErrors(kind: string, obj: unknown): ValidationCause[] {
  if (obj === null || typeof obj !== "object" || Array.isArray(obj)) {
    return [
      {
        type: "FieldValueTypeInvalid",
        message: `Invalid value: "${jsonType(obj)}": body must be of type object`,
        field: "",
      },
    ];
  }
  return decodeStrict(kind, obj).causes.filter((c) => c.type === "FieldValueTypeInvalid");
}

/** The API server's message for unknown fields: `strict decoding error: unknown field "spec.foo", unknown field "..."`. */
export function strictDecodingMessage(unknownFields: readonly string[]): string {
  return `strict decoding error: ${unknownFields.map((f) => `unknown field "${f}"`).join(", ")}`;
}
