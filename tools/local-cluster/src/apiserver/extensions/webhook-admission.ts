/**
 * Dynamic admission webhooks as admission plugins: every request reads the stored Mutating/Validating
 * WebhookConfigurations (compiled again only when one of them changed), picks the webhooks whose rules and
 * selectors match, and calls them as kube-apiserver does:
 *
 *   mutating:   one after another (configurations by name, webhooks in order); each JSONPatch applies to the object
 *               the next one sees (no reinvocation)
 *   validating: all at once; any denial rejects
 *   denial:     `admission webhook "<name>" denied the request: <message>`, the webhook's code (at least 400),
 *               reason and details (causes) kept
 *   call error: failurePolicy Fail -> 500 `failed calling webhook "<name>": ...`; Ignore -> as if allowed
 *   dryRun:     passed on in the review; a webhook with sideEffects Some/Unknown refuses a dry run (400)
 */
import type { Logger } from "pino";
import type {
  AdmissionAttributes,
  AdmissionChain,
  MutatingAdmission,
  ValidatingAdmission,
} from "../admission/types.ts";
import { type ApiError, internal, type StatusDetails, statusError } from "../errors.ts";
import { applyJsonPatch, parseJsonPatch } from "../patch/json-patch.ts";
import type { ResourceService } from "../rest/service.ts";
import { isObject, type Json, type JsonObject, type KubeObject } from "../types.ts";
import { type AdmissionResponse, callWebhook, WebhookCallError } from "./webhook-client.ts";
import {
  conditionsMatch,
  exemptFromWebhooks,
  matchingVersion,
  selectorsMatch,
  type Webhook,
  webhooksOf,
} from "./webhook-rules.ts";

/** A webhook that matched, and the version in which it sees the request. */
interface Match {
  readonly hook: Webhook;
  readonly version: string;
}

/** The object as served at `group/version` (conversion None, as for the CRDs here: only apiVersion changes). */
function asVersion(obj: KubeObject | null, group: string, version: string): KubeObject | null {
  if (!obj) return obj;
  const apiVersion = group ? `${group}/${version}` : version;
  return obj.apiVersion === apiVersion ? obj : { ...obj, apiVersion };
}

/** The request as a webhook matched through matchPolicy Equivalent sees it: converted to `version`. */
function inVersion(attrs: AdmissionAttributes, version: string): AdmissionAttributes {
  if (version === attrs.version) return attrs;
  return {
    ...attrs,
    version,
    requestVersion: attrs.version,
    object: asVersion(attrs.object, attrs.group, version),
    oldObject: asVersion(attrs.oldObject, attrs.group, version),
  };
}

const MUTATING = "admissionregistration.k8s.io/mutatingwebhookconfigurations";
const VALIDATING = "admissionregistration.k8s.io/validatingwebhookconfigurations";

/** The Status error kube-apiserver answers for a webhook's denial (webhook/errors `ToStatusErr`). */
export function denialError(webhook: string, status: JsonObject | undefined): ApiError {
  const deniedBy = `admission webhook "${webhook}" denied the request`;
  const message = typeof status?.message === "string" ? status.message : "";
  const reason = typeof status?.reason === "string" ? status.reason : "";
  const text = message
    ? `${deniedBy}: ${message}`
    : reason
      ? `${deniedBy}: ${reason}`
      : `${deniedBy} without explanation`;
  const code = typeof status?.code === "number" && status.code >= 400 && status.code <= 599 ? status.code : 400;
  const details = isObject(status?.details) ? (status.details as unknown as StatusDetails) : undefined;
  return statusError(code, reason, text, details);
}

/** `failed calling webhook "<name>": ...` as a 500 InternalError. */
export function callError(webhook: string, err: unknown): ApiError {
  const why = err instanceof Error ? err.message : String(err);
  return internal(new Error(`failed calling webhook "${webhook}": ${why}`));
}

class CompiledConfigurations {
  #key = "";
  #hooks: Webhook[] = [];
  readonly #svc: ResourceService;
  readonly #coll: string;

  constructor(svc: ResourceService, coll: string) {
    this.#svc = svc;
    this.#coll = coll;
  }

  /** The current webhooks (recompiled when a configuration changed). */
  current(): Webhook[] {
    const entries = this.#svc.store.list(this.#coll);
    const key = entries.map((e) => `${e.id}@${e.rev}`).join(",");
    if (key !== this.#key) {
      this.#hooks = webhooksOf(entries.map((e) => e.obj));
      this.#key = key;
    }
    return this.#hooks;
  }
}

/** Calls stored admission webhooks from the server's admission chain. */
export class WebhookAdmission {
  readonly #svc: ResourceService;
  readonly #logger: Logger;
  readonly #mutating: CompiledConfigurations;
  readonly #validating: CompiledConfigurations;

  constructor(svc: ResourceService, logger: Logger) {
    this.#svc = svc;
    this.#logger = logger;
    this.#mutating = new CompiledConfigurations(svc, MUTATING);
    this.#validating = new CompiledConfigurations(svc, VALIDATING);
  }

  /** Adds the mutating plugin (last, after built-in mutators) and the validating plugin to `chain`. */
  install(chain: AdmissionChain): void {
    const mutating: MutatingAdmission = { name: "MutatingAdmissionWebhook", admit: (a) => this.mutate(a) };
    const validating: ValidatingAdmission = { name: "ValidatingAdmissionWebhook", validate: (a) => this.validate(a) };
    chain.mutating.push(mutating);
    chain.validating.push(validating);
  }

  #matching(hooks: readonly Webhook[], attrs: AdmissionAttributes): Match[] {
    if (hooks.length === 0 || exemptFromWebhooks(attrs)) return [];
    const def = this.#svc.registry.lookup(attrs.group, attrs.version, attrs.resource);
    const namespaced = def?.namespaced ?? attrs.namespace !== "";
    let namespaceLabels: Record<string, string> | undefined;
    if (namespaced && attrs.namespace) {
      const ns = this.#svc.store.get("core/namespaces", attrs.namespace)?.obj;
      namespaceLabels = { ...ns?.metadata.labels, "kubernetes.io/metadata.name": attrs.namespace };
    } else if (attrs.group === "" && attrs.resource === "namespaces") {
      const obj = attrs.object ?? attrs.oldObject;
      namespaceLabels = { ...obj?.metadata.labels, "kubernetes.io/metadata.name": attrs.name };
    }
    const versions = def?.versions ?? [];
    const out: Match[] = [];
    for (const hook of hooks) {
      const version = matchingVersion(hook, attrs, namespaced, versions);
      if (version === undefined || !selectorsMatch(hook, attrs, { namespaceLabels })) continue;
      if (conditionsMatch(hook, attrs)) out.push({ hook, version });
    }
    return out;
  }

  /** Calls one webhook with the failurePolicy applied: undefined means "as if allowed" (Ignore). */
  async #call(hook: Webhook, attrs: AdmissionAttributes): Promise<AdmissionResponse | undefined> {
    if (attrs.dryRun && hook.sideEffects !== "None" && hook.sideEffects !== "NoneOnDryRun")
      throw statusError(400, "BadRequest", `admission webhook "${hook.name}" does not support dry run`);
    try {
      return await callWebhook(hook, attrs);
    } catch (err) {
      if (!(err instanceof WebhookCallError)) throw err;
      if (hook.failurePolicy === "Ignore") {
        // failurePolicy Ignore: the request goes on as if the webhook had allowed it (kube-apiserver logs it too).
        this.#logger.warn({ webhook: hook.name, err }, "failed calling webhook, failing open");
        return undefined;
      }
      this.#logger.warn({ webhook: hook.name, err }, "failed calling webhook, failing closed");
      throw callError(hook.name, err);
    }
  }

  /** Runs the matching mutating webhooks in order; returns the patched object (undefined when unchanged). */
  async mutate(attrs: AdmissionAttributes): Promise<KubeObject | undefined> {
    const matches = this.#matching(this.#mutating.current(), attrs);
    let obj = attrs.object;
    for (const { hook, version } of matches) {
      const seen = inVersion({ ...attrs, object: obj }, version);
      const r = await this.#call(hook, seen);
      if (!r) continue;
      attrs.warnings?.push(...r.warnings);
      if (!r.allowed) throw denialError(hook.name, r.status);
      if (r.patch === undefined || seen.object === null) continue;
      // The patch applies to the object as the webhook saw it; the result goes back to the request's version.
      obj = asVersion(applyWebhookPatch(hook.name, seen.object, r.patch), attrs.group, attrs.version);
    }
    return obj === attrs.object ? undefined : (obj ?? undefined);
  }

  /** Runs the matching validating webhooks in parallel; the first denial (in webhook order) wins. */
  async validate(attrs: AdmissionAttributes): Promise<void> {
    const matches = this.#matching(this.#validating.current(), attrs);
    if (matches.length === 0) return;
    const results = await Promise.allSettled(matches.map((m) => this.#call(m.hook, inVersion(attrs, m.version))));
    for (const r of results) if (r.status === "fulfilled" && r.value) attrs.warnings?.push(...r.value.warnings);
    for (const [i, r] of results.entries()) {
      if (r.status === "rejected") throw r.reason;
      if (r.value && !r.value.allowed) throw denialError(matches[i]?.hook.name ?? "", r.value.status);
    }
  }
}

/** Applies a mutating webhook's JSONPatch; a patch that does not apply is a 500, as in kube-apiserver. */
export function applyWebhookPatch(webhook: string, obj: KubeObject, patch: Json): KubeObject {
  let out: Json;
  try {
    out = applyJsonPatch(obj as unknown as Json, parseJsonPatch(patch));
  } catch (err) {
    throw internal(new Error(`JSON Patch from webhook "${webhook}": ${(err as Error).message}`));
  }
  if (!isObject(out) || !isObject(out.metadata))
    throw internal(new Error(`the patch of webhook "${webhook}" did not leave an object with metadata`));
  return out as unknown as KubeObject;
}
