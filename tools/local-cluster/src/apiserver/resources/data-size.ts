/**
 * The payload limits kube-apiserver's validation puts on ConfigMaps and Secrets (pkg/apis/core/validation: the
 * summed size of the values may not pass MaxSecretSize, 1 MiB), with its field paths and messages: a ConfigMap's
 * error names the whole object (`[]`), a Secret's names `data`.
 */
import type { StatusCause } from "../errors.ts";
import type { KubeObject } from "../types.ts";
import type { Strategy } from "./types.ts";

/** core.MaxSecretSize: 1 MiB of values per ConfigMap or Secret. */
export const MAX_SECRET_SIZE = 1024 * 1024;

function stringValues(v: unknown): string[] {
  if (v === null || typeof v !== "object" || Array.isArray(v)) return [];
  return Object.values(v as Record<string, unknown>).filter((x): x is string => typeof x === "string");
}

/** Decoded size of a base64 value without decoding it. */
function base64Bytes(s: string): number {
  const t = s.replace(/\s+/g, "");
  const pad = t.endsWith("==") ? 2 : t.endsWith("=") ? 1 : 0;
  return Math.max(0, Math.floor((t.length * 3) / 4) - pad);
}

function tooLong(field: string): StatusCause {
  return { reason: "FieldValueTooLong", message: `Too long: must have at most ${MAX_SECRET_SIZE} bytes`, field };
}

/** Validation of a ConfigMap's total size: `data` values (UTF-8 bytes) plus decoded `binaryData` values. */
export function validateConfigMapSize(obj: KubeObject): StatusCause[] {
  let total = 0;
  for (const v of stringValues(obj.data)) total += Buffer.byteLength(v, "utf8");
  for (const v of stringValues(obj.binaryData)) total += base64Bytes(v);
  return total > MAX_SECRET_SIZE ? [tooLong("[]")] : [];
}

/** Validation of a Secret's total size: decoded `data` values plus `stringData` values (merged into data). */
export function validateSecretSize(obj: KubeObject): StatusCause[] {
  let total = 0;
  for (const v of stringValues(obj.data)) total += base64Bytes(v);
  for (const v of stringValues(obj.stringData)) total += Buffer.byteLength(v, "utf8");
  return total > MAX_SECRET_SIZE ? [tooLong("data")] : [];
}

/** The ConfigMap strategy. */
export const configMapStrategy: Strategy = { validate: (obj) => validateConfigMapSize(obj) };

/** The Secret strategy. */
export const secretStrategy: Strategy = { validate: (obj) => validateSecretSize(obj) };
