/**
 * POST serviceaccounts/NAME/token (authentication.k8s.io/v1 TokenRequest): a bearer token that authenticates as the
 * service account, as kube-apiserver's TokenRequest gives the kubelet for a projected serviceAccountToken volume.
 *
 * The local API server authenticates bearer tokens through one table (token -> user); a TokenRequest adds an entry
 * for `system:serviceaccount:<namespace>:<name>` (groups system:serviceaccounts, system:serviceaccounts:<namespace>,
 * system:authenticated; extra `authentication.kubernetes.io/credential-id: JTI=<id>`, as kube-apiserver gives a
 * TokenRequest token since 1.30) and removes it at expiry. Unlike kube-apiserver's, the token is an opaque random string, not
 * a signed JWT, and it lives in memory only: a restart of the API server invalidates it, and deleting the account
 * does not. expirationSeconds defaults to 3600 and must be at least 600 (kube-apiserver's message).
 */
import { randomBytes, randomUUID } from "node:crypto";
import { statusError } from "../errors.ts";
import { isObject, nowTime } from "../types.ts";
import { sendJson } from "./io.ts";
import type { SubresourceContext, SubresourceHandler } from "./resource-handler.ts";
import type { UserInfo } from "./server.ts";

/** kube-apiserver's default and minimum token lifetimes (seconds). */
const DEFAULT_EXPIRATION_SECONDS = 3600;
const MIN_EXPIRATION_SECONDS = 600;

/** The TokenRequest handler, adding tokens to `tokens` (the server's bearer-token table). */
export function tokenRequest(tokens: Map<string, UserInfo>): SubresourceHandler {
  return async (c: SubresourceContext) => {
    if (c.req.method !== "POST")
      throw statusError(405, "MethodNotAllowed", "only POST is supported on serviceaccounts/token");
    const ns = c.info.namespace ?? "default";
    const name = c.info.name as string;
    c.svc.get(c.def, ns, name); // 404 as kube-apiserver: serviceaccounts "NAME" not found
    const body = await c.body();
    const spec = isObject(body) && isObject(body.spec) ? body.spec : {};
    const seconds = typeof spec.expirationSeconds === "number" ? spec.expirationSeconds : DEFAULT_EXPIRATION_SECONDS;
    if (seconds < MIN_EXPIRATION_SECONDS)
      throw statusError(
        422,
        "Invalid",
        `TokenRequest.authentication.k8s.io "${name}" is invalid: spec.expirationSeconds: Invalid value: ${seconds}: may not specify a duration less than 10 minutes`,
      );
    const audiences = Array.isArray(spec.audiences) ? spec.audiences : [];
    const token = randomBytes(32).toString("base64url");
    const expires = Date.now() + seconds * 1000;
    if (!c.ctx.dryRun) {
      tokens.set(token, {
        username: `system:serviceaccount:${ns}:${name}`,
        groups: ["system:serviceaccounts", `system:serviceaccounts:${ns}`, "system:authenticated"],
        extra: { "authentication.kubernetes.io/credential-id": [`JTI=${randomUUID()}`] },
      });
      setTimeout(() => tokens.delete(token), seconds * 1000).unref();
    }
    sendJson(c.res, 201, {
      kind: "TokenRequest",
      apiVersion: "authentication.k8s.io/v1",
      metadata: { name, namespace: ns, creationTimestamp: nowTime() },
      spec: { audiences, expirationSeconds: seconds, boundObjectRef: spec.boundObjectRef ?? null },
      status: { token, expirationTimestamp: nowTime(expires) },
    });
  };
}
