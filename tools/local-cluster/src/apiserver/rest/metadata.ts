/**
 * Object metadata rules shared by create and update: names, generateName, labels, immutable fields, finalizer
 * rules, and the strict decoding of ObjectMeta.
 */
import { randomBytes } from "node:crypto";
import type { StatusCause } from "../errors.ts";
import { OBJECT_META_FIELDS } from "../resources/schema.ts";
import type { ResourceDef } from "../resources/types.ts";
import type { KubeObject } from "../types.ts";

const SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const QUALIFIED =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const GEN_ALPHABET = "bcdfghjklmnpqrstvwxz2456789";

/** `generateName` + 5 random characters, as the real server builds names. */
export function generateName(prefix: string): string {
  const bytes = randomBytes(5);
  let s = "";
  for (const b of bytes) s += GEN_ALPHABET[b % GEN_ALPHABET.length];
  return prefix.slice(0, 58) + s;
}

/**
 * Groups whose object names kube-apiserver checks only as path segments (rbac's ValidateRBACName is
 * path.ValidatePathSegmentName), so `system:controller:x` and `kubevirt.io:edit` are valid role names.
 */
const PATH_SEGMENT_NAME_GROUPS: ReadonlySet<string> = new Set(["rbac.authorization.k8s.io"]);

/** apimachinery's path.IsValidPathSegmentName. */
function pathSegmentCauses(name: string, field: string): StatusCause[] {
  const invalid = (why: string): StatusCause[] => [
    { reason: "FieldValueInvalid", message: `Invalid value: "${name}": ${why}`, field },
  ];
  if (name === "." || name === "..") return invalid(`may not be '${name}'`);
  for (const c of ["/", "%"]) if (name.includes(c)) return invalid(`may not contain '${c}'`);
  return [];
}

/** Validation causes for a name. */
export function validateName(def: ResourceDef, name: string | undefined, field = "metadata.name"): StatusCause[] {
  if (!name)
    return [{ reason: "FieldValueRequired", message: "Required value: name or generateName is required", field }];
  if (PATH_SEGMENT_NAME_GROUPS.has(def.group)) return pathSegmentCauses(name, field);
  if (def.nameIsLabel) {
    if (name.length > 63 || !LABEL.test(name))
      return [
        {
          reason: "FieldValueInvalid",
          message: `Invalid value: "${name}": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
          field,
        },
      ];
    return [];
  }
  if (name.length > 253 || !SUBDOMAIN.test(name))
    return [
      {
        reason: "FieldValueInvalid",
        message: `Invalid value: "${name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
        field,
      },
    ];
  return [];
}

/** apimachinery's TotalAnnotationSizeLimitB: keys plus values of all annotations, 256 KiB. */
export const TOTAL_ANNOTATION_SIZE_LIMIT_BYTES = 256 * 1024;

/** The summed UTF-8 size of annotation keys and values, as kube-apiserver counts it. */
function annotationBytes(annotations: Record<string, unknown> | undefined): number {
  let total = 0;
  for (const [k, v] of Object.entries(annotations ?? {}))
    total += Buffer.byteLength(k, "utf8") + (typeof v === "string" ? Buffer.byteLength(v, "utf8") : 0);
  return total;
}

/** Validation causes for labels, annotations (and their total size), finalizers and owner references. */
export function validateMeta(obj: KubeObject): StatusCause[] {
  const causes: StatusCause[] = [];
  const m = obj.metadata;
  for (const [k, v] of Object.entries(m.labels ?? {})) {
    if (!QUALIFIED.test(k))
      causes.push({
        reason: "FieldValueInvalid",
        message: `Invalid value: "${k}": name part must consist of alphanumeric characters, '-', '_' or '.'`,
        field: "metadata.labels",
      });
    if (typeof v !== "string" || v.length > 63 || !LABEL_VALUE.test(v))
      causes.push({
        reason: "FieldValueInvalid",
        message: `Invalid value: "${String(v)}": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character`,
        field: `metadata.labels`,
      });
  }
  for (const [k, v] of Object.entries(m.annotations ?? {})) {
    if (!QUALIFIED.test(k))
      causes.push({
        reason: "FieldValueInvalid",
        message: `Invalid value: "${k}": name part must consist of alphanumeric characters, '-', '_' or '.'`,
        field: "metadata.annotations",
      });
    if (typeof v !== "string")
      causes.push({
        reason: "FieldValueInvalid",
        message: "Invalid value: annotation values must be strings",
        field: `metadata.annotations.${k}`,
      });
  }
  if (annotationBytes(m.annotations) > TOTAL_ANNOTATION_SIZE_LIMIT_BYTES)
    causes.push({
      reason: "FieldValueTooLong",
      message: `Too long: must have at most ${TOTAL_ANNOTATION_SIZE_LIMIT_BYTES} bytes`,
      field: "metadata.annotations",
    });
  for (const f of m.finalizers ?? []) {
    if (typeof f !== "string" || !QUALIFIED.test(f))
      causes.push({
        reason: "FieldValueInvalid",
        message: `Invalid value: "${String(f)}": name part must consist of alphanumeric characters`,
        field: "metadata.finalizers",
      });
  }
  (m.ownerReferences ?? []).forEach((r, i) => {
    for (const k of ["apiVersion", "kind", "name", "uid"] as const)
      if (!r[k])
        causes.push({
          reason: "FieldValueRequired",
          message: "Required value",
          field: `metadata.ownerReferences[${i}].${k}`,
        });
  });
  if ((m.ownerReferences ?? []).filter((r) => r.controller).length > 1)
    causes.push({
      reason: "FieldValueInvalid",
      message: "Invalid value: only one reference can have Controller set to true",
      field: "metadata.ownerReferences",
    });
  return causes;
}

/** Unknown ObjectMeta fields (strict decoding), as `metadata.x` paths. */
export function unknownMetaFields(obj: KubeObject): string[] {
  return Object.keys(obj.metadata)
    .filter((k) => !OBJECT_META_FIELDS.has(k))
    .map((k) => `metadata.${k}`);
}

/** The parts of an object compared to decide a generation bump (everything but metadata, and status if split). */
export function specPart(obj: KubeObject, hasStatus: boolean): Record<string, unknown> {
  const { metadata: _m, status, apiVersion: _a, kind: _k, ...rest } = obj;
  return hasStatus ? rest : { ...rest, status };
}
