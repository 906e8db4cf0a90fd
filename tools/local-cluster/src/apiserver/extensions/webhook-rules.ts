/**
 * Which admission webhooks a request reaches (pure): the stored MutatingWebhookConfiguration /
 * ValidatingWebhookConfiguration objects (admissionregistration.k8s.io/v1) are read into {@link Webhook}s, and a
 * webhook is called when one of its rules matches (operations, apiGroups, apiVersions, resources with
 * `resource/subresource` forms such as `*`, `*\/*`, `pods/*`, `*\/status`, and scope) and its namespaceSelector and
 * objectSelector match, as k8s.io/apiserver's webhook `predicates` do.
 *
 *   configurations (sorted by name) -> webhooks (in order) -> rules x selectors -> the webhooks to call
 */
import type { AdmissionAttributes } from "../admission/types.ts";
import { fromLabelSelectorObject, type LabelSelector, matchLabels } from "../selectors/labels.ts";
import { isObject, type Json, type KubeObject } from "../types.ts";

/** One `rules[]` entry (RuleWithOperations). */
export interface WebhookRule {
  readonly operations: readonly string[];
  readonly apiGroups: readonly string[];
  readonly apiVersions: readonly string[];
  readonly resources: readonly string[];
  /** `Cluster`, `Namespaced` or `*` (the default). */
  readonly scope: string;
}

/** A webhook of a stored configuration, with its defaults applied. */
export interface Webhook {
  /** The webhook's name (`virtualmachines-mutator.kubevirt.io`). */
  readonly name: string;
  /** The configuration object it belongs to. */
  readonly configuration: string;
  /** Where to POST the AdmissionReview (clientConfig.url, or the service mapped to a URL). */
  readonly url: string;
  /** The name the server's certificate must carry, for a Service reference (`<svc>.<ns>.svc`); else the URL's host. */
  readonly serverName?: string;
  /** PEM CA bundle from clientConfig.caBundle (undefined: the system's trust store). */
  readonly caPem: string | undefined;
  readonly rules: readonly WebhookRule[];
  /** `Fail` (default) or `Ignore`. */
  readonly failurePolicy: "Fail" | "Ignore";
  /** `None`, `NoneOnDryRun`, `Some` or `Unknown`. */
  readonly sideEffects: string;
  /** Deadline in seconds (default 10, at most 30). */
  readonly timeoutSeconds: number;
  readonly namespaceSelector: LabelSelector;
  readonly objectSelector: LabelSelector;
  /**
   * `Equivalent` (the default): a request in another served version of the same resource matches too, and the
   * webhook sees it converted to the rule's version; `Exact`: only the listed versions.
   */
  readonly matchPolicy: "Exact" | "Equivalent";
  /** matchConditions (CEL); all must hold for the webhook to be called ({@link conditionsMatch}). */
  readonly matchConditions: readonly { readonly name: string; readonly expression: string }[];
}

/**
 * APIService and webhook Service references cannot be resolved by an API server outside the cluster network; this
 * annotation on the configuration (or APIService) object gives the Service's base URL (`https://127.0.0.1:8443`),
 * as virt-api's manifests do (`kubevirt-ts.io/service-url`).
 */
export const SERVICE_URL_ANNOTATION = "kubevirt-ts.io/service-url";

const strings = (v: Json | undefined, dflt: readonly string[] = []): readonly string[] =>
  Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : dflt;

function selector(v: Json | undefined): LabelSelector {
  if (!isObject(v)) return [];
  return fromLabelSelectorObject(v);
}

/** The URL a clientConfig points at, or undefined when it names neither a url nor a service. */
export function clientConfigUrl(
  clientConfig: Json | undefined,
  serviceBaseUrl: string | undefined,
): string | undefined {
  if (!isObject(clientConfig)) return undefined;
  if (typeof clientConfig.url === "string" && clientConfig.url !== "") return clientConfig.url;
  const svc = clientConfig.service;
  if (!isObject(svc) || typeof svc.name !== "string") return undefined;
  const path = typeof svc.path === "string" ? svc.path : "";
  if (serviceBaseUrl) return `${serviceBaseUrl.replace(/\/+$/, "")}${path}`;
  const port = typeof svc.port === "number" ? svc.port : 443;
  return `https://${svc.name}.${typeof svc.namespace === "string" ? svc.namespace : "default"}.svc:${port}${path}`;
}

/**
 * The name a webhook's or APIService's certificate is verified against when it is called through a Service
 * reference: `<name>.<namespace>.svc`, as kube-apiserver verifies it, also when the Service is reached through the
 * {@link SERVICE_URL_ANNOTATION} URL. Undefined for a `url` clientConfig (verified against the URL's host).
 */
export function serviceServerName(clientConfig: Json | undefined): string | undefined {
  if (!isObject(clientConfig) || (typeof clientConfig.url === "string" && clientConfig.url !== "")) return undefined;
  const svc = clientConfig.service;
  if (!isObject(svc) || typeof svc.name !== "string") return undefined;
  return `${svc.name}.${typeof svc.namespace === "string" ? svc.namespace : "default"}.svc`;
}

/** Decodes a base64 caBundle to PEM (undefined when absent or empty). */
export function caBundlePem(v: Json | undefined): string | undefined {
  if (typeof v !== "string" || v === "") return undefined;
  return Buffer.from(v, "base64").toString("utf8");
}

function rulesOf(v: Json | undefined): WebhookRule[] {
  if (!Array.isArray(v)) return [];
  return v.filter(isObject).map((r) => ({
    operations: strings(r.operations),
    apiGroups: strings(r.apiGroups),
    apiVersions: strings(r.apiVersions),
    resources: strings(r.resources),
    scope: typeof r.scope === "string" ? r.scope : "*",
  }));
}

/**
 * The webhooks of stored configuration objects, configurations sorted by name and webhooks in their order (the
 * order kube-apiserver calls mutating webhooks in). Entries that cannot be called (no url/service) are kept with an
 * empty url, so calling them fails by their failurePolicy, as on a real cluster.
 */
export function webhooksOf(configurations: readonly KubeObject[]): Webhook[] {
  const sorted = [...configurations].sort((a, b) => (a.metadata.name ?? "").localeCompare(b.metadata.name ?? ""));
  const out: Webhook[] = [];
  for (const cfg of sorted) {
    const base = cfg.metadata.annotations?.[SERVICE_URL_ANNOTATION];
    const hooks = (cfg as { webhooks?: Json }).webhooks;
    if (!Array.isArray(hooks)) continue;
    for (const h of hooks) {
      if (!isObject(h) || typeof h.name !== "string") continue;
      const cc = isObject(h.clientConfig) ? h.clientConfig : {};
      const timeout = typeof h.timeoutSeconds === "number" ? h.timeoutSeconds : 10;
      let namespaceSelector: LabelSelector = [];
      let objectSelector: LabelSelector = [];
      try {
        namespaceSelector = selector(h.namespaceSelector);
        objectSelector = selector(h.objectSelector);
      } catch {
        // An invalid selector matches nothing on a real server's validation; here it was stored, so match all.
      }
      out.push({
        name: h.name,
        configuration: cfg.metadata.name ?? "",
        url: clientConfigUrl(cc, base) ?? "",
        serverName: serviceServerName(cc),
        caPem: caBundlePem(cc.caBundle),
        rules: rulesOf(h.rules),
        failurePolicy: h.failurePolicy === "Ignore" ? "Ignore" : "Fail",
        sideEffects: typeof h.sideEffects === "string" ? h.sideEffects : "None",
        timeoutSeconds: Math.min(30, Math.max(1, timeout)),
        namespaceSelector,
        matchPolicy: h.matchPolicy === "Exact" ? "Exact" : "Equivalent",
        objectSelector,
        matchConditions: Array.isArray(h.matchConditions)
          ? h.matchConditions.filter(isObject).map((c) => ({
              name: typeof c.name === "string" ? c.name : "",
              expression: typeof c.expression === "string" ? c.expression : "",
            }))
          : [],
      });
    }
  }
  return out;
}

function resourceMatches(patterns: readonly string[], resource: string, sub: string): boolean {
  return patterns.some((p) => {
    const [pr, ps] = p.split("/", 2) as [string, string | undefined];
    if (ps === undefined) return sub === "" && (pr === "*" || pr === resource);
    return (pr === "*" || pr === resource) && (ps === "*" || ps === sub);
  });
}

/**
 * The version in which `hook` sees the request: its own version when a rule lists it, else (matchPolicy Equivalent)
 * the first of the resource's other served `versions` a rule lists; undefined when the hook does not match.
 */
export function matchingVersion(
  hook: Pick<Webhook, "rules" | "matchPolicy">,
  attrs: AdmissionAttributes,
  namespaced: boolean,
  versions: readonly string[],
): string | undefined {
  if (hook.rules.some((r) => ruleMatches(r, attrs, namespaced))) return attrs.version;
  if (hook.matchPolicy !== "Equivalent") return undefined;
  return versions.find(
    (v) => v !== attrs.version && hook.rules.some((r) => ruleMatches(r, { ...attrs, version: v }, namespaced)),
  );
}

/** True when `rule` covers the request (operation, group, version, resource/subresource and scope). */
export function ruleMatches(rule: WebhookRule, attrs: AdmissionAttributes, namespaced: boolean): boolean {
  const has = (list: readonly string[], v: string): boolean => list.includes("*") || list.includes(v);
  if (!has(rule.operations, attrs.operation)) return false;
  if (!has(rule.apiGroups, attrs.group) || !has(rule.apiVersions, attrs.version)) return false;
  if (!resourceMatches(rule.resources, attrs.resource, attrs.subResource)) return false;
  if (rule.scope === "Cluster") return !namespaced;
  if (rule.scope === "Namespaced") return namespaced;
  return true;
}

/** What the selectors are matched against. */
export interface SelectorFacts {
  /** The request's namespace labels (undefined for cluster-scoped objects other than a Namespace). */
  readonly namespaceLabels: Record<string, string> | undefined;
}

/** True when the namespaceSelector and objectSelector admit the request. */
export function selectorsMatch(hook: Webhook, attrs: AdmissionAttributes, facts: SelectorFacts): boolean {
  if (hook.namespaceSelector.length > 0 && facts.namespaceLabels !== undefined)
    if (!matchLabels(hook.namespaceSelector, facts.namespaceLabels)) return false;
  if (hook.objectSelector.length === 0) return true;
  const labelsOf = (o: KubeObject | null): Record<string, string> => o?.metadata.labels ?? {};
  return (
    matchLabels(hook.objectSelector, labelsOf(attrs.object)) ||
    (attrs.oldObject !== null && matchLabels(hook.objectSelector, labelsOf(attrs.oldObject)))
  );
}

const NAME_PREFIX = /^(object|oldObject)\.metadata\.name\.startsWith\("([^"\\]*)"\)$/;

/**
 * True unless a matchCondition rules the call out. This server has no CEL: it evaluates the one form KubeVirt's
 * webhooks use, `object.metadata.name.startsWith("...")` (also on oldObject), and treats any other expression as
 * true, so such a webhook is called (failing closed, as kube-apiserver does for a condition it cannot evaluate under
 * failurePolicy Fail).
 */
export function conditionsMatch(hook: Pick<Webhook, "matchConditions">, attrs: AdmissionAttributes): boolean {
  return hook.matchConditions.every((c) => {
    const m = NAME_PREFIX.exec(c.expression.trim());
    if (!m) return true;
    const obj = m[1] === "object" ? attrs.object : attrs.oldObject;
    return typeof obj?.metadata.name === "string" && obj.metadata.name.startsWith(m[2] ?? "");
  });
}

/** Webhook configurations never pass through webhooks (so a broken webhook can always be removed). */
export function exemptFromWebhooks(attrs: AdmissionAttributes): boolean {
  return (
    attrs.group === "admissionregistration.k8s.io" &&
    (attrs.resource === "mutatingwebhookconfigurations" || attrs.resource === "validatingwebhookconfigurations")
  );
}
