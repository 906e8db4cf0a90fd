/**
 * Validation cause helpers: field paths in Kubernetes' notation (`spec.domain.devices.disks[1].name`), the cause types
 * of metav1, and the admission denial KubeVirt's webhooks build from a list of causes.
 */
import type { Status, StatusCause } from "../status.ts";
import type { ValidationCause } from "../types.ts";

/** metav1.CauseType values KubeVirt's webhooks use. */
export const CAUSE_TYPE = {
  required: "FieldValueRequired",
  invalid: "FieldValueInvalid",
  notSupported: "FieldValueNotSupported",
  duplicate: "FieldValueDuplicate",
  notFound: "FieldValueNotFound",
  forbidden: "FieldValueForbidden",
  typeInvalid: "FieldValueTypeInvalid",
} as const;

/** An immutable field path, printed as k8s.io/apimachinery's `field.Path`. */
export class FieldPath {
  readonly #text: string;
  constructor(text = "") {
    this.#text = text;
  }
  /** Appends `.name` for each name. */
  child(...names: string[]): FieldPath {
    let t = this.#text;
    for (const n of names) t = t ? `${t}.${n}` : n;
    return new FieldPath(t);
  }
  /** Appends `[i]`. */
  index(i: number): FieldPath {
    return new FieldPath(`${this.#text}[${i}]`);
  }
  /** Appends `[key]` (map entries). */
  key(k: string): FieldPath {
    return new FieldPath(`${this.#text}[${k}]`);
  }
  toString(): string {
    return this.#text;
  }
}

/** Starts a path, e.g. `path("spec")`. */
export function path(...names: string[]): FieldPath {
  return new FieldPath().child(...names);
}

/** Builds one cause. */
export function cause(type: string, message: string, field: FieldPath | string): ValidationCause {
  return { type, message, field: String(field) };
}

/** The Kubernetes Status a validating webhook returns for rejected causes (KubeVirt `ToAdmissionResponse`). */
export interface AdmissionDenial {
  /** 422 when built from causes, 400 for a plain error. */
  code: 400 | 422;
  /** "Invalid" for causes, "BadRequest" for a plain error. */
  reason: "Invalid" | "BadRequest";
  /** The first ten cause messages joined with ", " (plus "and N more validation errors"), or the error. */
  message: string;
  /** At most ten causes, in order. */
  causes: ValidationCause[];
}

/** KubeVirt's `ToAdmissionResponse(causes)`: joins up to ten messages, keeps up to ten causes. */
export function denialFromCauses(causes: ValidationCause[]): AdmissionDenial {
  const kept = causes.slice(0, 10);
  let message = kept.map((c) => c.message).join(", ");
  if (causes.length > 10) message = `${message}, and ${causes.length - 10} more validation errors`;
  return { code: 422, reason: "Invalid", message, causes: kept };
}

/** KubeVirt's `ToAdmissionResponseError(err)`: a 400 with the message only. */
export function denialFromError(message: string): AdmissionDenial {
  return { code: 400, reason: "BadRequest", message, causes: [] };
}

/** The wire form of causes (`type` -> `reason`; an empty field is omitted, as Go's omitempty does). */
export function toWireCauses(causes: readonly ValidationCause[]): StatusCause[] {
  return causes.map((c) =>
    c.field ? { reason: c.type, message: c.message, field: c.field } : { reason: c.type, message: c.message },
  );
}

/** A denial as a complete Kubernetes `Status` object (what an admission response's `result` or an API error carries). */
export function denialToStatus(d: AdmissionDenial): Status {
  const status: Status = {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message: d.message,
    reason: d.reason,
    code: d.code,
  };
  if (d.causes.length > 0) status.details = { causes: toWireCauses(d.causes) };
  return status;
}
