/**
 * A tiny builder for structural OpenAPI v3 schemas whose TypeScript types are inferred from the schema itself, so
 * every API type is written exactly once (the schema) and derived everywhere else (`Infer<typeof schema>`).
 *
 * ```
 *   obj({ name: str(), size: int() }, { required: ["name"] })
 *     │ JSON (what the CRD carries)      {type:"object", properties:{...}, required:["name"]}
 *     └ type (what the code sees)        { name: string; size?: number }
 * ```
 * The nodes are plain JSON objects: `crds.ts` emits them unchanged, `strict-decode.ts` walks them.
 */

/** The JSON shape of one structural schema node (the subset the CRDs use). */
export interface JsonSchema {
  type?: "object" | "array" | "string" | "integer" | "number" | "boolean";
  description?: string;
  format?: string;
  pattern?: string;
  minimum?: number;
  maximum?: number;
  nullable?: boolean;
  properties?: Record<string, JsonSchema>;
  additionalProperties?: JsonSchema;
  required?: string[];
  items?: JsonSchema;
  anyOf?: JsonSchema[];
  "x-kubernetes-int-or-string"?: boolean;
  "x-kubernetes-preserve-unknown-fields"?: boolean;
  "x-kubernetes-list-type"?: "atomic" | "set" | "map";
  "x-kubernetes-list-map-keys"?: string[];
  "x-kubernetes-map-type"?: "atomic" | "granular";
}

declare const typeTag: unique symbol;

/** A schema node that also carries (at type level only) the TypeScript type of the values it describes. */
export type Schema<T> = JsonSchema & { readonly [typeTag]?: T };

/** The TypeScript type a schema describes. */
export type Infer<S> = S extends Schema<infer T> ? T : never;

/** Options every node accepts. */
export interface NodeOptions {
  /** Shown by `kubectl explain`. */
  description?: string;
  nullable?: boolean;
}

function node<T>(base: JsonSchema, o: NodeOptions = {}): Schema<T> {
  const out: JsonSchema = {};
  if (o.description !== undefined) out.description = o.description;
  Object.assign(out, base);
  if (o.nullable) out.nullable = true;
  return out;
}

/** A string; `format` e.g. "date-time". */
export function str(o: NodeOptions & { format?: string; pattern?: string } = {}): Schema<string> {
  const base: JsonSchema = { type: "string" };
  if (o.format) base.format = o.format;
  if (o.pattern) base.pattern = o.pattern;
  return node(base, o);
}

/**
 * A string with a closed set of values at the type level. The CRD keeps `type: string` (KubeVirt does not enforce
 * enums structurally: its webhooks do, with their own messages), and the values are listed in the description.
 */
export function strEnum<const V extends readonly string[]>(values: V, o: NodeOptions = {}): Schema<V[number]> {
  const list = values.map((v) => `"${v}"`).join(", ");
  const description = o.description ? `${o.description}\nAllowed values: ${list}.` : `Allowed values: ${list}.`;
  return node({ type: "string" }, { ...o, description });
}

/** An RFC 3339 timestamp string (metav1.Time). */
export function time(o: NodeOptions = {}): Schema<string> {
  return node({ type: "string", format: "date-time" }, o);
}

/** An integer (int32 unless `format: "int64"`). */
export function int(
  o: NodeOptions & { format?: "int32" | "int64"; minimum?: number; maximum?: number } = {},
): Schema<number> {
  const base: JsonSchema = { type: "integer", format: o.format ?? "int32" };
  if (o.minimum !== undefined) base.minimum = o.minimum;
  if (o.maximum !== undefined) base.maximum = o.maximum;
  return node(base, o);
}

/** A boolean. */
export function bool(o: NodeOptions = {}): Schema<boolean> {
  return node({ type: "boolean" }, o);
}

/** Kubernetes resource.Quantity: an int or a string such as "64M", "1Gi", "100m". */
export function quantity(o: NodeOptions = {}): Schema<string | number> {
  return node(
    {
      anyOf: [{ type: "integer" }, { type: "string" }],
      pattern:
        "^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$",
      "x-kubernetes-int-or-string": true,
    },
    o,
  );
}

/** An int-or-string (intstr.IntOrString), e.g. a port or a percentage. */
export function intOrString(o: NodeOptions = {}): Schema<string | number> {
  return node({ anyOf: [{ type: "integer" }, { type: "string" }], "x-kubernetes-int-or-string": true }, o);
}

/** An array of `item`; `listType` defaults to atomic (KubeVirt's default). */
export function arr<T>(
  item: Schema<T>,
  o: NodeOptions & { listType?: "atomic" | "set" | "map"; mapKeys?: string[] } = {},
): Schema<T[]> {
  const base: JsonSchema = { type: "array", items: item };
  if (o.listType) base["x-kubernetes-list-type"] = o.listType;
  if (o.mapKeys) base["x-kubernetes-list-map-keys"] = o.mapKeys;
  return node(base, o);
}

/** A string-keyed map of `value` (additionalProperties). */
export function map<T>(value: Schema<T>, o: NodeOptions = {}): Schema<Record<string, T>> {
  return node({ type: "object", additionalProperties: value }, o);
}

/** An object whose content the schema does not describe (kept as-is by the API server). */
export function freeform(o: NodeOptions = {}): Schema<Record<string, unknown>> {
  return node({ type: "object", "x-kubernetes-preserve-unknown-fields": true }, o);
}

/** An empty marker object, e.g. `pod: {}` or `bridge: {}`. */
export function marker(o: NodeOptions = {}): Schema<Record<string, never>> {
  return node({ type: "object" }, o);
}

type Props = Record<string, Schema<unknown>>;
type Simplify<T> = { [K in keyof T]: T[K] } & {};
type ObjectType<P extends Props, R extends keyof P> = Simplify<
  { -readonly [K in Exclude<keyof P, R>]?: Infer<P[K]> } & { -readonly [K in R]: Infer<P[K]> }
>;

/**
 * An object with the given properties; those in `required` are non-optional in the inferred type. With
 * `preserveUnknownFields` the API server keeps fields the schema does not list (the listed ones are still checked).
 */
export function obj<P extends Props, const R extends readonly (keyof P & string)[] = []>(
  properties: P,
  o: NodeOptions & { required?: R; preserveUnknownFields?: boolean } = {},
): Schema<ObjectType<P, R[number]>> {
  const base: JsonSchema = { type: "object", properties };
  if (o.required && o.required.length > 0) base.required = [...o.required];
  if (o.preserveUnknownFields) base["x-kubernetes-preserve-unknown-fields"] = true;
  return node(base, o);
}
