/**
 * SelfSubjectAccessReview and SubjectAccessReview (authorization.k8s.io/v1), answered by the same authorizer that
 * guards requests, so `kubectl auth can-i` tells what a request would get:
 *
 *   spec.resourceAttributes {namespace, verb, group, resource, subresource, name}  xor  spec.nonResourceAttributes
 *   {path, verb}; SubjectAccessReview also spec.user / spec.groups (a SelfSubjectAccessReview asks for the caller)
 *   -> status {allowed, reason}
 *
 * SelfSubjectRulesReview (`kubectl auth can-i --list`) lists the caller's rules in spec.namespace.
 *
 * Who may create them is an ordinary RBAC question (system:basic-user grants the self review to every
 * authenticated user; SubjectAccessReview needs a grant such as cluster-admin's).
 */
import { invalid } from "../errors.ts";
import { isObject, type KubeObject } from "../types.ts";
import type { Attributes, Authorizer, AuthUser } from "./rbac.ts";

function str(o: Record<string, unknown>, key: string): string | undefined {
  const v = o[key];
  return typeof v === "string" && v !== "" ? v : undefined;
}

function attributesOf(review: KubeObject, spec: Record<string, unknown>, user: AuthUser): Attributes {
  const res = spec.resourceAttributes;
  const non = spec.nonResourceAttributes;
  const name = review.metadata.name ?? "";
  if (isObject(res) === isObject(non))
    throw invalid(review.kind ?? "", "authorization.k8s.io", name, [
      {
        reason: "FieldValueRequired",
        field: "spec.resourceAttributes",
        message: "Required value: exactly one of nonResourceAttributes or resourceAttributes must be specified",
      },
    ]);
  if (isObject(non))
    return { user, verb: str(non, "verb") ?? "", resourceRequest: false, path: str(non, "path") ?? "" };
  const r = res as Record<string, unknown>;
  return {
    user,
    verb: str(r, "verb") ?? "",
    resourceRequest: true,
    apiGroup: str(r, "group") ?? "",
    apiVersion: str(r, "version"),
    namespace: str(r, "namespace"),
    resource: str(r, "resource") ?? "",
    subresource: str(r, "subresource"),
    name: str(r, "name"),
  };
}

function subjectOf(review: KubeObject, spec: Record<string, unknown>, caller: AuthUser): AuthUser {
  if (review.kind === "SelfSubjectAccessReview") return caller;
  const groups = Array.isArray(spec.groups) ? spec.groups.filter((g): g is string => typeof g === "string") : [];
  const username = str(spec, "user");
  if (username === undefined && groups.length === 0)
    throw invalid(review.kind ?? "", "authorization.k8s.io", review.metadata.name ?? "", [
      {
        reason: "FieldValueRequired",
        field: "spec.user",
        message: 'Invalid value: "": at least one of user or group must be specified',
      },
    ]);
  return { username: username ?? "", groups };
}

/** The answered review: the request with `status` set (a self review's spec names the caller, as kube's does). */
export function reviewAccess(review: KubeObject, caller: AuthUser, authorizer: Authorizer): KubeObject {
  const out = structuredClone(review);
  const spec = isObject(out.spec) ? out.spec : {};
  const subject = subjectOf(out, spec, caller);
  const d = authorizer.authorize(attributesOf(out, spec, subject));
  out.spec = spec;
  out.status = { allowed: d.allowed, ...(d.reason ? { reason: d.reason } : {}) };
  return out;
}

/** A SelfSubjectRulesReview answered: the caller's resource and non-resource rules in `spec.namespace`. */
export function reviewRules(review: KubeObject, caller: AuthUser, authorizer: Authorizer): KubeObject {
  const out = structuredClone(review);
  const spec = isObject(out.spec) ? out.spec : {};
  const rules = authorizer.rulesFor(caller, str(spec, "namespace") ?? "");
  out.spec = spec;
  out.status = {
    resourceRules: rules
      .filter((r) => (r.resources ?? []).length > 0)
      .map((r) => ({
        verbs: [...r.verbs],
        apiGroups: [...(r.apiGroups ?? [])],
        resources: [...(r.resources ?? [])],
        ...(r.resourceNames?.length ? { resourceNames: [...r.resourceNames] } : {}),
      })),
    nonResourceRules: rules
      .filter((r) => (r.nonResourceURLs ?? []).length > 0)
      .map((r) => ({ verbs: [...r.verbs], nonResourceURLs: [...(r.nonResourceURLs ?? [])] })),
    incomplete: false,
  };
  return out;
}
