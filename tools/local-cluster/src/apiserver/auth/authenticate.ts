/**
 * Who a request is, as kube-apiserver decides it with its default `--anonymous-auth=true`:
 *
 *   Authorization: Bearer <known token>     -> that token's user
 *   Authorization: anything else            -> nobody: 401 Unauthorized
 *   a TLS client certificate                -> nobody: 401 (this server authenticates no certificates; kube-apiserver
 *                                              refuses one its client CA did not sign the same way)
 *   no credentials at all                   -> system:anonymous in group system:unauthenticated, which RBAC then
 *                                              judges: /healthz, /livez, /readyz and /version are allowed by
 *                                              system:public-info-viewer, everything else is 403 Forbidden
 */
import { timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { TLSSocket } from "node:tls";
import type { UserInfo } from "../http/server.ts";

/** kube-apiserver's anonymous user (pkg/authentication/request/anonymous). */
export const ANONYMOUS_USER: UserInfo = { username: "system:anonymous", groups: ["system:unauthenticated"] };

/** The user of a `Bearer` Authorization header among `tokens` (compared in constant time), or undefined. */
export function userOfToken(tokens: ReadonlyMap<string, UserInfo>, header: string | undefined): UserInfo | undefined {
  if (!header?.startsWith("Bearer ")) return undefined;
  const token = Buffer.from(header.slice(7).trim());
  for (const [t, user] of tokens) {
    const b = Buffer.from(t);
    if (b.length === token.length && timingSafeEqual(b, token)) return user;
  }
  return undefined;
}

/** True when the request came over TLS with a client certificate. */
function presentsCertificate(req: IncomingMessage): boolean {
  const socket = req.socket as Partial<TLSSocket>;
  if (typeof socket.getPeerCertificate !== "function") return false;
  const cert = socket.getPeerCertificate();
  return cert !== null && Object.keys(cert).length > 0;
}

/** The request's user (see the module comment), or undefined for credentials that do not authenticate (401). */
export function authenticateRequest(tokens: ReadonlyMap<string, UserInfo>, req: IncomingMessage): UserInfo | undefined {
  const header = req.headers.authorization;
  if (header !== undefined) return userOfToken(tokens, header);
  if (presentsCertificate(req)) return undefined;
  return ANONYMOUS_USER;
}
