/**
 * Admission extension points, shaped after admission.k8s.io/v1 AdmissionReview so webhook handlers written for
 * them also work behind a real apiserver. The write pipeline runs:
 *
 *   decode -> strategy (metadata, status rules) -> mutating plugins (in order, may replace the object)
 *          -> schema defaulting, pruning, validation -> validating plugins (all, any denial rejects) -> storage
 *
 * A plugin denies by throwing an ApiError (e.g. `invalid(...)`, `forbidden(...)`); anything else thrown is a 500.
 */
import type { KubeObject } from "../types.ts";

/** The operation being admitted. */
export type AdmissionOperation = "CREATE" | "UPDATE" | "DELETE" | "CONNECT";

/** What a plugin sees (AdmissionRequest). */
export interface AdmissionAttributes {
  readonly operation: AdmissionOperation;
  readonly group: string;
  readonly version: string;
  readonly kind: string;
  /**
   * The kind of `object` when it is not the resource's own kind (a `pods/eviction` CREATE carries a policy/v1
   * Eviction: AdmissionRequest `kind`); absent when it is `group`/`version`/`kind`.
   */
  readonly objectKind?: { readonly group: string; readonly version: string; readonly kind: string };
  readonly resource: string;
  readonly subResource: string;
  readonly namespace: string;
  readonly name: string;
  /** The new object (null on DELETE). */
  readonly object: KubeObject | null;
  /** The old object (null on CREATE). */
  readonly oldObject: KubeObject | null;
  readonly dryRun: boolean;
  readonly userInfo: { readonly username: string; readonly groups: readonly string[] };
  /** CreateOptions / UpdateOptions / DeleteOptions as sent. */
  readonly options: Readonly<Record<string, unknown>>;
  /**
   * The version the request was made in, when a webhook with `matchPolicy: Equivalent` sees it converted to
   * `version` (AdmissionRequest `requestKind`/`requestResource`); absent when they are the same.
   */
  readonly requestVersion?: string;
  /** Where webhooks' warnings go: the request's `Warning: 299` headers (absent for in-process writers). */
  readonly warnings?: string[];
}

/** A mutating plugin: returns the object to continue with (or undefined to keep it). */
export interface MutatingAdmission {
  readonly name: string;
  admit(attrs: AdmissionAttributes): Promise<KubeObject | undefined>;
}

/** A validating plugin. */
export interface ValidatingAdmission {
  readonly name: string;
  validate(attrs: AdmissionAttributes): Promise<void>;
}

/** The ordered plugin lists; add to them to extend the server (webhooks come in through here). */
export class AdmissionChain {
  readonly mutating: MutatingAdmission[] = [];
  readonly validating: ValidatingAdmission[] = [];

  /** Runs every mutating plugin in order. */
  async mutate(attrs: AdmissionAttributes): Promise<KubeObject | null> {
    let obj = attrs.object;
    for (const m of this.mutating) {
      const out = await m.admit({ ...attrs, object: obj });
      if (out) obj = out;
    }
    return obj;
  }

  /** Runs every validating plugin; the first denial wins. */
  async validate(attrs: AdmissionAttributes): Promise<void> {
    if (this.validating.length === 0) return;
    await Promise.all(this.validating.map((v) => v.validate(attrs)));
  }
}
