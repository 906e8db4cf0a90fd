/**
 * The typed half of kube-apiserver's body decoding that the structural schemas do not cover: ObjectMeta's field
 * types (every kind), and for built-in kinds the top-level spec/status objects and ConfigMap/Secret string maps.
 * A body whose JSON types do not fit the Go types is refused before anything reads it, with the decoder's 400:
 *
 *   Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal number into Go struct field
 *   Pod.spec of type v1.PodSpec
 *
 * (Go's UnmarshalTypeError: the innermost struct type, then the JSON path from the root.)
 * Found by the API fuzz lane: a number as a pod's spec or a metadata.name reached code that expected objects and
 * strings, answering 500 (or, for a custom resource, failing virt-api's webhook call).
 *
 * metav1.MicroTime fields (a Lease's acquireTime and renewTime, an Event's eventTime and series.lastObservedTime)
 * must be RFC 3339 with exactly six fractional digits: kube-apiserver parses them with Go's time.Parse and layout
 * `2006-01-02T15:04:05.000000Z07:00`, so JavaScript's `toISOString()` (three digits) is refused:
 *
 *   Lease in version "v1" cannot be handled as a Lease: parsing time "2026-11-26T16:21:13.485Z" as
 *   "2006-01-02T15:04:05.000000Z07:00": cannot parse ".485Z" as ".000000"
 *
 * Found by the scale bench: virt-controller's leader election worked on this server and never got its Lease on
 * kube-apiserver.
 */
import { badRequest } from "../errors.ts";
import type { ResourceDef } from "../resources/types.ts";

type O = Record<string, unknown>;

const isObject = (v: unknown): v is O => typeof v === "object" && v !== null && !Array.isArray(v);

/** encoding/json's name for the JSON type of `v`. */
function jsonType(v: unknown): string {
  if (Array.isArray(v)) return "array";
  if (typeof v === "boolean") return "bool";
  return typeof v === "object" ? "object" : typeof v;
}

interface Mismatch {
  readonly value: unknown;
  readonly struct: string;
  readonly field: string;
  readonly type: string;
}

const STRING_FIELDS = ["name", "generateName", "namespace", "selfLink", "resourceVersion"];
const INT_FIELDS = ["generation", "deletionGracePeriodSeconds"];
const TIME_FIELDS = ["creationTimestamp", "deletionTimestamp"];

function metaMismatch(meta: unknown): Mismatch | undefined {
  if (meta === undefined || meta === null) return undefined;
  if (!isObject(meta)) return { value: meta, struct: "", field: "metadata", type: "v1.ObjectMeta" };
  const at = (field: string, type: string, value: unknown): Mismatch => ({
    value,
    struct: "ObjectMeta",
    field: `metadata.${field}`,
    type,
  });
  for (const f of STRING_FIELDS) {
    const v = meta[f];
    if (v !== undefined && v !== null && typeof v !== "string") return at(f, "string", v);
  }
  if (meta.uid !== undefined && meta.uid !== null && typeof meta.uid !== "string")
    return at("uid", "types.UID", meta.uid);
  for (const f of INT_FIELDS) {
    const v = meta[f];
    if (v !== undefined && v !== null && !Number.isSafeInteger(v)) return at(f, "int64", v);
  }
  for (const f of TIME_FIELDS) {
    const v = meta[f];
    if (v !== undefined && v !== null && typeof v !== "string") return at(f, "v1.Time", v);
  }
  for (const f of ["labels", "annotations"]) {
    const m = stringMap(meta[f], "ObjectMeta", `metadata.${f}`);
    if (m) return m;
  }
  const list = (f: string, item: string, ok: (v: unknown) => boolean): Mismatch | undefined => {
    const v = meta[f];
    if (v === undefined || v === null) return undefined;
    if (!Array.isArray(v)) return at(f, `[]${item}`, v);
    const bad: unknown = (v as unknown[]).find((x) => !ok(x));
    return bad === undefined ? undefined : at(f, item, bad);
  };
  return (
    list("finalizers", "string", (x) => typeof x === "string") ??
    list("ownerReferences", "v1.OwnerReference", isObject) ??
    list("managedFields", "v1.ManagedFieldsEntry", isObject)
  );
}

function stringMap(v: unknown, struct: string, field: string): Mismatch | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isObject(v)) return { value: v, struct, field, type: "map[string]string" };
  const bad = Object.values(v).find((x) => typeof x !== "string" && x !== null);
  return bad === undefined ? undefined : { value: bad, struct, field, type: "string" };
}

function builtinMismatch(def: ResourceDef, version: string, body: O): Mismatch | undefined {
  for (const part of ["spec", "status"] as const) {
    const v = body[part];
    if (v !== undefined && v !== null && !isObject(v))
      return {
        value: v,
        struct: def.kind,
        field: part,
        type: `${version}.${def.kind}${part === "spec" ? "Spec" : "Status"}`,
      };
  }
  if (def.kind === "ConfigMap")
    return stringMap(body.data, "ConfigMap", "data") ?? stringMap(body.binaryData, "ConfigMap", "binaryData");
  if (def.kind === "Secret")
    return stringMap(body.data, "Secret", "data") ?? stringMap(body.stringData, "Secret", "stringData");
  return undefined;
}

/** Throws kube's 400 when `body`'s JSON types do not fit the kind's Go types (see the module comment). */
export function checkDecodedTypes(def: ResourceDef, version: string, body: O): void {
  const m = metaMismatch(body.metadata) ?? (def.custom ? undefined : builtinMismatch(def, version, body));
  const cannot = `${def.kind} in version "${version}" cannot be handled as a ${def.kind}`;
  if (m) {
    const struct = m.struct || def.kind;
    throw badRequest(
      `${cannot}: json: cannot unmarshal ${jsonType(m.value)} into Go struct field ${struct}.${m.field} of type ${m.type}`,
    );
  }
  if (def.custom) return;
  for (const path of MICRO_TIME_FIELDS[`${def.group}/${def.kind}`] ?? []) {
    const value = path.reduce<unknown>((v, k) => (isObject(v) ? v[k] : undefined), body);
    if (value === undefined || value === null) continue;
    if (typeof value !== "string") {
      const field = path.join(".");
      throw badRequest(
        `${cannot}: json: cannot unmarshal ${jsonType(value)} into Go struct field ${def.kind}.${field} of type string`,
      );
    }
    const problem = microTimeParseError(value);
    if (problem) throw badRequest(`${cannot}: ${problem}`);
  }
}

/** The metav1.MicroTime fields of built-in kinds, by `group/Kind` (core is the empty group). */
const MICRO_TIME_FIELDS: Readonly<Record<string, readonly (readonly string[])[]>> = {
  "coordination.k8s.io/Lease": [
    ["spec", "acquireTime"],
    ["spec", "renewTime"],
  ],
  "/Event": [["eventTime"], ["series", "lastObservedTime"]],
  "events.k8s.io/Event": [["eventTime"], ["series", "lastObservedTime"]],
};

/** metav1.RFC3339Micro, the layout Go parses a MicroTime with. */
const MICRO_LAYOUT = "2006-01-02T15:04:05.000000Z07:00";

/**
 * Go's time.Parse error for `value` against {@link MICRO_LAYOUT}, or undefined when it parses: the layout's
 * elements are matched in order and the first that does not fit is named with the rest of the input, as Go does.
 */
export function microTimeParseError(value: string): string | undefined {
  const elements: readonly [layout: string, pattern: RegExp][] = [
    ["2006", /^\d{4}/],
    ["-", /^-/],
    ["01", /^\d{2}/],
    ["-", /^-/],
    ["02", /^\d{2}/],
    ["T", /^T/],
    ["15", /^\d{2}/],
    [":", /^:/],
    ["04", /^\d{2}/],
    [":", /^:/],
    ["05", /^\d{2}/],
    [".000000", /^\.\d{6}/],
    ["Z07:00", /^(?:Z|[+-]\d{2}:\d{2})/],
  ];
  const prefix = `parsing time ${JSON.stringify(value)}`;
  let rest = value;
  for (const [layout, pattern] of elements) {
    const m = pattern.exec(rest);
    if (!m)
      return `${prefix} as ${JSON.stringify(MICRO_LAYOUT)}: cannot parse ${JSON.stringify(rest)} as ${JSON.stringify(layout)}`;
    rest = rest.slice(m[0].length);
  }
  return rest === "" ? undefined : `${prefix}: extra text: ${JSON.stringify(rest)}`;
}
