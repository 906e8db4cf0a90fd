/**
 * User impersonation (`Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid`, `Impersonate-Extra-<key>`), as
 * kube-apiserver's impersonation filter applies it after authentication. An aggregated server that acts "as the
 * caller" (virt-api with requestheader auth) relies on it, so that admission sees the real user.
 *
 *   token -> user --(Impersonate-* headers, allowed)--> impersonated user (+ system:authenticated)
 *
 * Who may impersonate: whom the authorizer allows the verb `impersonate` on each thing asked for, in kube's order:
 * the user (`users` NAME, or `serviceaccounts` NAME in its namespace for `system:serviceaccount:NS:NAME`), each
 * group (`groups`), each extra value (`authentication.k8s.io` `userextras/KEY`) and the uid (`uids`); the first
 * refusal is kube-apiserver's 403 naming it. An impersonated ServiceAccount without groups gets its fixed groups;
 * the impersonated user carries the extras asked for (aggregated servers see them as X-Remote-Extra-*).
 */
import type { IncomingHttpHeaders } from "node:http";
import type { Attributes, Authorizer } from "../auth/rbac.ts";
import { forbiddenError } from "../auth/request-attributes.ts";
import { internal } from "../errors.ts";
import type { UserInfo } from "../http/server.ts";

const SA_PREFIX = "system:serviceaccount:";

function values(headers: IncomingHttpHeaders, name: string): string[] {
  const v = headers[name];
  if (v === undefined) return [];
  return (Array.isArray(v) ? v : [v]).map((s) => s.trim()).filter((s) => s !== "");
}

function impersonating(user: UserInfo, resource: string, name: string, more: Partial<Attributes> = {}): Attributes {
  return { user, verb: "impersonate", resourceRequest: true, apiGroup: "", resource, name, ...more };
}

/** What asking to act as `username` with `groups`, extras and uid needs allowed, in kube's order. */
function impersonationRequests(user: UserInfo, username: string, groups: string[], headers: IncomingHttpHeaders) {
  const out: Attributes[] = [];
  const sa = username.startsWith(SA_PREFIX) ? username.slice(SA_PREFIX.length).split(":") : undefined;
  if (sa?.length === 2) out.push(impersonating(user, "serviceaccounts", sa[1], { namespace: sa[0] }));
  else out.push(impersonating(user, "users", username));
  for (const g of groups) out.push(impersonating(user, "groups", g));
  const auth = { apiGroup: "authentication.k8s.io" };
  for (const h of Object.keys(headers)
    .filter((k) => k.startsWith("impersonate-extra-"))
    .sort()) {
    const key = decodeURIComponent(h.slice("impersonate-extra-".length));
    for (const v of values(headers, h)) out.push(impersonating(user, "userextras", v, { ...auth, subresource: key }));
  }
  for (const uid of values(headers, "impersonate-uid")) out.push(impersonating(user, "uids", uid, auth));
  return { out, serviceAccountNamespace: sa?.length === 2 ? sa[0] : undefined };
}

/**
 * The user a request acts as: `user` itself, or whom its Impersonate-* headers name when `authorizer` allows each
 * part (kube-apiserver's 403 otherwise).
 */
export function impersonatedUser(user: UserInfo, headers: IncomingHttpHeaders, authorizer: Authorizer): UserInfo {
  const username = values(headers, "impersonate-user")[0];
  const groups = values(headers, "impersonate-group").flatMap((g) => g.split(",").map((s) => s.trim()));
  const hasExtra = Object.keys(headers).some((h) => h.startsWith("impersonate-extra-"));
  const hasUid = values(headers, "impersonate-uid").length > 0;
  if (username === undefined) {
    if (groups.length > 0 || hasExtra || hasUid)
      throw internal(new Error("requested impersonation of groups, extra or uid without impersonating a user"));
    return user;
  }
  const asked = groups.filter((g) => g !== "");
  const { out, serviceAccountNamespace } = impersonationRequests(user, username, asked, headers);
  for (const attrs of out) {
    const d = authorizer.authorize(attrs);
    if (!d.allowed) throw forbiddenError(attrs, d.reason);
  }
  const all =
    asked.length === 0 && serviceAccountNamespace !== undefined
      ? ["system:serviceaccounts", `system:serviceaccounts:${serviceAccountNamespace}`]
      : asked;
  if (username !== "system:anonymous" && !all.includes("system:authenticated")) all.push("system:authenticated");
  const extra: Record<string, string[]> = {};
  for (const h of Object.keys(headers).filter((k) => k.startsWith("impersonate-extra-")))
    extra[decodeURIComponent(h.slice("impersonate-extra-".length))] = values(headers, h);
  return Object.keys(extra).length > 0 ? { username, groups: all, extra } : { username, groups: all };
}
