/**
 * AdmissionReview v1 as kube-apiserver speaks it to a webhook (POST, `application/json`):
 *
 *   kube-apiserver --AdmissionReview{request{uid, kind, resource, operation, userInfo, object, oldObject}}--> virt-api
 *   virt-api --AdmissionReview{response{uid, allowed, patchType: JSONPatch, patch: base64([...])}}--> kube-apiserver
 *   or, on denial:         {response{uid, allowed: false, status{code: 422, reason: Invalid, message, details.causes}}}
 *
 * A denial's message is the causes' messages joined by ", " (KubeVirt `ToAdmissionResponse`); the API server
 * shows it as `admission webhook "<name>" denied the request: <message>`.
 */

import type { JsonPatchOp } from "@kvt/api";
import type { Status, StatusCause } from "@kvt/kube";
import type { UserInfo } from "../server/identity.ts";

/** `request` of an AdmissionReview. */
export interface AdmissionRequest {
  readonly uid: string;
  readonly kind: { group: string; version: string; kind: string };
  readonly resource: { group: string; version: string; resource: string };
  readonly subResource?: string;
  readonly name?: string;
  readonly namespace?: string;
  readonly operation: "CREATE" | "UPDATE" | "DELETE" | "CONNECT";
  readonly userInfo?: Partial<UserInfo>;
  readonly object?: Record<string, unknown>;
  readonly oldObject?: Record<string, unknown> | null;
  readonly dryRun?: boolean;
}

/** `response` of an AdmissionReview. */
export interface AdmissionResponse {
  readonly uid: string;
  readonly allowed: boolean;
  readonly status?: Status;
  readonly patchType?: "JSONPatch";
  readonly patch?: string;
  readonly warnings?: string[];
}

/** What an admitter decides: allow (with an optional patch), or deny with a Status. */
export type AdmitResult =
  | { readonly allowed: true; readonly patch?: readonly JsonPatchOp[]; readonly warnings?: readonly string[] }
  | {
      readonly allowed: false;
      readonly code: number;
      readonly reason?: string;
      readonly message: string;
      readonly causes?: readonly StatusCause[];
    };

/** One webhook's logic. */
export type Admitter = (request: AdmissionRequest) => Promise<AdmitResult>;

/** Allow, unchanged. */
export const ALLOW: AdmitResult = { allowed: true };

/** Thrown for a body that is not an AdmissionReview v1 (answered 400). */
export class BadReviewError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "BadReviewError";
  }
}

/** Parses and checks an AdmissionReview v1 request body. */
export function parseReview(body: unknown): AdmissionRequest {
  const review = body as { apiVersion?: unknown; kind?: unknown; request?: unknown } | null;
  if (!review || typeof review !== "object") throw new BadReviewError("the body is not a JSON object");
  if (review.kind !== "AdmissionReview" || review.apiVersion !== "admission.k8s.io/v1") {
    throw new BadReviewError(
      `expected admission.k8s.io/v1 AdmissionReview, got ${String(review.apiVersion)} ${String(review.kind)}`,
    );
  }
  const request = review.request as Partial<AdmissionRequest> | undefined;
  if (!request || typeof request.uid !== "string" || typeof request.operation !== "string") {
    throw new BadReviewError("the AdmissionReview has no request with a uid and an operation");
  }
  if (!isObject(request.kind) || !isObject(request.resource))
    throw new BadReviewError("the AdmissionReview request has no kind/resource");
  // The admitters read these as objects (metadata, spec): anything else is a malformed review, not a 500.
  for (const field of ["object", "oldObject"] as const) {
    const v = request[field] as unknown;
    if (v !== undefined && v !== null && !isObject(v))
      throw new BadReviewError(`the AdmissionReview request's ${field} is not a JSON object`);
  }
  for (const field of ["namespace", "name"] as const)
    if (request[field] !== undefined && typeof request[field] !== "string")
      throw new BadReviewError(`the AdmissionReview request's ${field} is not a string`);
  return request as AdmissionRequest;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** Builds the AdmissionReview answer for `request`. */
export function reviewResponse(request: AdmissionRequest, result: AdmitResult): Record<string, unknown> {
  let response: AdmissionResponse;
  if (result.allowed) {
    const patch = result.patch && result.patch.length > 0 ? result.patch : undefined;
    response = {
      uid: request.uid,
      allowed: true,
      ...(patch
        ? { patchType: "JSONPatch" as const, patch: Buffer.from(JSON.stringify(patch)).toString("base64") }
        : {}),
      ...(result.warnings?.length ? { warnings: [...result.warnings] } : {}),
    };
  } else {
    response = {
      uid: request.uid,
      allowed: false,
      status: {
        code: result.code,
        ...(result.reason ? { reason: result.reason } : {}),
        message: result.message,
        ...(result.causes?.length ? { details: { causes: [...result.causes] } } : {}),
      },
    };
  }
  return { apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", response };
}

/** Escapes a JSON-pointer token (`~` and `/`). */
export function pointerToken(token: string): string {
  return token.replaceAll("~", "~0").replaceAll("/", "~1");
}

/** Renders a manifest value for a message: strings as they are, anything else as JSON. */
export function show(value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}
