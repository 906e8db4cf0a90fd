/**
 * From a request to authorizer attributes, and from a denial to kube-apiserver's 403, as k8s.io/apiserver's
 * RequestInfoFactory and responsewriters.Forbidden do:
 *
 *   GET/HEAD  collection -> list, object -> get      (?watch=true or /watch/ -> watch)
 *   POST -> create   PUT -> update   PATCH -> patch   DELETE object -> delete, collection -> deletecollection
 *   non-resource paths -> the lower-case HTTP method, on the path
 *
 * A list or watch with `fieldSelector=metadata.name=X` carries name X (so resourceNames can allow it); a request on
 * the namespace object itself carries that namespace (`/api/v1/namespaces/NAME` is namespace NAME).
 */
import { type ApiError, qualifiedResource, statusError } from "../errors.ts";
import type { RequestInfo } from "../http/request-info.ts";
import type { Attributes, Authorizer, AuthUser } from "./rbac.ts";

const WRITE_VERBS: Readonly<Record<string, string>> = {
  POST: "create",
  PUT: "update",
  PATCH: "patch",
};

function nameFromFieldSelector(query: URLSearchParams): string | undefined {
  const sel = query.get("fieldSelector");
  if (!sel) return undefined;
  for (const term of sel.split(",")) {
    const m = /^\s*metadata\.name\s*==?\s*(.*?)\s*$/.exec(term);
    if (m) return m[1];
  }
  return undefined;
}

function isWatch(info: RequestInfo, query: URLSearchParams): boolean {
  const w = query.get("watch");
  return info.legacyWatch || w === "true" || w === "1";
}

/** The attributes of a resource request (`info` as parsed from its path). */
export function resourceAttributes(
  user: AuthUser,
  method: string,
  info: RequestInfo,
  query: URLSearchParams,
): Attributes {
  let verb: string;
  let name = info.name;
  if (method === "GET" || method === "HEAD") {
    verb = isWatch(info, query) ? "watch" : name === undefined ? "list" : "get";
    if (name === undefined && (verb === "list" || verb === "watch")) name = nameFromFieldSelector(query);
  } else if (method === "DELETE") verb = name === undefined ? "deletecollection" : "delete";
  else verb = WRITE_VERBS[method] ?? method.toLowerCase();
  const namespace = info.resource === "namespaces" && info.name !== undefined ? info.name : info.namespace;
  return {
    user,
    verb,
    resourceRequest: true,
    apiGroup: info.group,
    apiVersion: info.version,
    namespace,
    resource: info.resource,
    subresource: info.subresource,
    name,
  };
}

/** The attributes of a non-resource request (`/version`, `/apis`, `/openapi/v3/...`). */
export function nonResourceAttributes(user: AuthUser, method: string, path: string): Attributes {
  return { user, verb: method.toLowerCase(), resourceRequest: false, path };
}

/** responsewriters' forbiddenMessage: `User "u" cannot list resource "secrets" in API group "" at the cluster scope`. */
export function forbiddenMessage(attrs: Attributes): string {
  const user = attrs.user.username;
  if (!attrs.resourceRequest) return `User "${user}" cannot ${attrs.verb} path "${attrs.path}"`;
  const resource = attrs.subresource ? `${attrs.resource}/${attrs.subresource}` : attrs.resource;
  const scope = attrs.namespace ? `in the namespace "${attrs.namespace}"` : "at the cluster scope";
  return `User "${user}" cannot ${attrs.verb} resource "${resource}" in API group "${attrs.apiGroup ?? ""}" ${scope}`;
}

/** The 403 kube-apiserver sends for a denied request (apierrors.NewForbidden of the requested group-resource). */
export function forbiddenError(attrs: Attributes, reason: string): ApiError {
  const why = reason ? `${forbiddenMessage(attrs)}: ${reason}` : forbiddenMessage(attrs);
  if (!attrs.resourceRequest) return statusError(403, "Forbidden", `forbidden: ${why}`, {});
  const qr = { group: attrs.apiGroup ?? "", resource: attrs.resource ?? "" };
  const name = attrs.name ?? "";
  const subject = name ? `${qualifiedResource(qr)} "${name}"` : qualifiedResource(qr);
  return statusError(403, "Forbidden", `${subject} is forbidden: ${why}`, {
    ...(name ? { name } : {}),
    ...(qr.group ? { group: qr.group } : {}),
    kind: qr.resource,
  });
}

/** Throws kube-apiserver's 403 unless `authorizer` allows `attrs`. */
export function authorizeOrThrow(authorizer: Authorizer, attrs: Attributes): void {
  const d = authorizer.authorize(attrs);
  if (!d.allowed) throw forbiddenError(attrs, d.reason);
}
