/**
 * The authorization step of the request pipeline, after authentication, as kube-apiserver's WithImpersonation and
 * WithAuthorization filters: the Impersonate-* headers (each part authorized), then the request's own attributes
 * (resource request or non-resource path). Throws kube-apiserver's 403; returns the user the request acts as. Each
 * decision goes to the authorization audit when the server keeps one (authorization-audit.ts).
 */
import type { IncomingMessage } from "node:http";
import { impersonatedUser } from "../extensions/impersonation.ts";
import { parseResourcePath } from "../http/request-info.ts";
import type { UserInfo } from "../http/server.ts";
import { recordingAuthorizer } from "./authorization-audit.ts";
import type { Authorizer } from "./rbac.ts";
import { authorizeOrThrow, nonResourceAttributes, resourceAttributes } from "./request-attributes.ts";

/** Authorizes `req` (whose URL is `url`) for `authenticated`; the user it acts as, or throws 403. */
export function authorizeRequest(
  authorizer: Authorizer,
  authenticated: UserInfo,
  req: IncomingMessage,
  url: URL,
): UserInfo {
  const userAgent = req.headers["user-agent"];
  const source = "request";
  // Each header line its own value (an extra's values may hold commas), as Go's http.Header keeps them.
  const impersonation = recordingAuthorizer(authorizer, { source, userAgent });
  const user = impersonatedUser(authenticated, req.headersDistinct, impersonation);
  // impersonatedUser returns `authenticated` itself when the request impersonates nobody.
  const impersonatedBy = user === authenticated ? undefined : authenticated.username;
  const method = req.method ?? "GET";
  const info = parseResourcePath(url.pathname.replace(/\/+$/, "") || "/");
  authorizeOrThrow(
    recordingAuthorizer(authorizer, { source, userAgent, impersonatedBy }),
    info ? resourceAttributes(user, method, info, url.searchParams) : nonResourceAttributes(user, method, url.pathname),
  );
  return user;
}
