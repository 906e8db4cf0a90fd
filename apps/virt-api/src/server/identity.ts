/**
 * Who is calling: an aggregated API server receives the authenticated user from kube-apiserver's front proxy in
 * request headers (`X-Remote-User`, `X-Remote-Group` repeated, `X-Remote-Extra-<key>` repeated, keys
 * percent-encoded), and trusts them only from a client that presents a certificate signed by the
 * requestheader client CA (kube-apiserver's `--proxy-client-cert-file`, checked here against the CA virt-api is
 * given, optionally with an allowed common name).
 */
import type { IncomingMessage } from "node:http";
import type { TLSSocket } from "node:tls";

/**
 * Who a request acts as (authentication.k8s.io `UserInfo`: an AdmissionReview's `userInfo`, or the aggregator's
 * X-Remote-* headers). virt-api's writes for the caller impersonate it (`@kvt/kube`'s `Impersonation`).
 */
export interface UserInfo {
  readonly username: string;
  readonly uid?: string;
  readonly groups: readonly string[];
  readonly extra: Readonly<Record<string, readonly string[]>>;
}

/** virt-api's service account (KubeVirt's `kubevirt-apiserver`): one of those the VMI update webhook trusts. */
export const VIRT_API_SERVICE_ACCOUNT = "kubevirt-apiserver";

/** The user a service account authenticates as (its name and the groups the API server gives every such token). */
export function serviceAccountUser(namespace: string, name: string): UserInfo {
  return {
    username: `system:serviceaccount:${namespace}:${name}`,
    groups: ["system:serviceaccounts", `system:serviceaccounts:${namespace}`, "system:authenticated"],
    extra: {},
  };
}

/** How to trust the caller's identity headers. */
export interface RequestHeaderAuth {
  /** Common names allowed for the proxy's client certificate; empty accepts any cert the CA signed. */
  readonly allowedNames: readonly string[];
}

function headerValues(req: IncomingMessage, name: string): string[] {
  const raw = req.headersDistinct[name.toLowerCase()];
  return (raw ?? []).flatMap((v) => v.split(",").map((s) => s.trim())).filter((s) => s.length > 0);
}

/** Parses the X-Remote-* headers into a user, or `undefined` when no user header is present. */
export function userFromHeaders(req: IncomingMessage): UserInfo | undefined {
  const username = req.headersDistinct["x-remote-user"]?.[0];
  if (!username) return undefined;
  const extra: Record<string, string[]> = {};
  for (const [name, values] of Object.entries(req.headersDistinct)) {
    if (!name.startsWith("x-remote-extra-") || !values) continue;
    const key = decodeURIComponent(name.slice("x-remote-extra-".length));
    extra[key] = values;
  }
  return { username, groups: headerValues(req, "x-remote-group"), extra };
}

/** Why an identity could not be established (the caller answers 401). */
export class IdentityError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "IdentityError";
  }
}

/**
 * The caller's identity, or `undefined` to act as virt-api itself (when no requestheader auth is configured,
 * as KubeVirt's virt-api does). With `auth`, the TLS client certificate must be verified and allowed.
 */
export function callerIdentity(req: IncomingMessage, auth: RequestHeaderAuth | undefined): UserInfo | undefined {
  if (!auth) return undefined;
  const socket = req.socket as TLSSocket;
  if (typeof socket.getPeerCertificate !== "function" || !socket.authorized) {
    throw new IdentityError("Unauthorized: a client certificate signed by the requestheader client CA is required");
  }
  const cn = socket.getPeerCertificate().subject?.CN;
  const cnText = Array.isArray(cn) ? cn.join(",") : (cn ?? "");
  if (auth.allowedNames.length > 0 && !auth.allowedNames.includes(cnText)) {
    throw new IdentityError(`Unauthorized: client certificate CN "${cnText}" is not an allowed requestheader name`);
  }
  const user = userFromHeaders(req);
  if (!user) throw new IdentityError("Unauthorized: no X-Remote-User header");
  return user;
}
