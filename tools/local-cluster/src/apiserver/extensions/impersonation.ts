/**
 * User impersonation (`Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid`, `Impersonate-Extra-<key>`), as
 * kube-apiserver's impersonation filter applies it after authentication. An aggregated server that acts "as the
 * caller" (virt-api with requestheader auth) relies on it, so that admission sees the real user.
 *
 *   token -> user --(Impersonate-* headers, allowed)--> impersonated user (+ system:authenticated)
 *
 * Who may impersonate: this server has no RBAC, so members of `system:masters` may (as cluster-admin may on a
 * real cluster); anyone else gets kube-apiserver's 403.
 */
import type { IncomingHttpHeaders } from "node:http";
import { ApiError, internal } from "../errors.ts";
import type { UserInfo } from "../http/server.ts";

function values(headers: IncomingHttpHeaders, name: string): string[] {
  const v = headers[name];
  if (v === undefined) return [];
  return (Array.isArray(v) ? v : [v]).map((s) => s.trim()).filter((s) => s !== "");
}

/** The user a request acts as: `user` itself, or whom its Impersonate-* headers name (403 when not allowed). */
export function impersonatedUser(user: UserInfo, headers: IncomingHttpHeaders): UserInfo {
  const username = values(headers, "impersonate-user")[0];
  const groups = values(headers, "impersonate-group").flatMap((g) => g.split(",").map((s) => s.trim()));
  const hasExtra = Object.keys(headers).some((h) => h.startsWith("impersonate-extra-"));
  const hasUid = values(headers, "impersonate-uid").length > 0;
  if (username === undefined) {
    if (groups.length > 0 || hasExtra || hasUid)
      throw internal(new Error("requested impersonation of groups, extra or uid without impersonating a user"));
    return user;
  }
  if (!user.groups.includes("system:masters"))
    throw new ApiError(
      403,
      "Forbidden",
      `users "${username}" is forbidden: User "${user.username}" cannot impersonate resource "users" in API group "" at the cluster scope`,
      { name: username, kind: "users" },
    );
  const all = groups.filter((g) => g !== "");
  if (username !== "system:anonymous" && !all.includes("system:authenticated")) all.push("system:authenticated");
  return { username, groups: all };
}
