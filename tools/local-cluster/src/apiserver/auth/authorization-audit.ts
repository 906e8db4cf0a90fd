/**
 * The authorization audit (`--authorization-audit-log FILE`; off by default): what the authorizer decided for each
 * request, and which RBAC rules allowed it, as JSON lines. kube-apiserver's audit log (`--audit-log-path`) records
 * whole requests as audit.k8s.io Events; this records only the authorization part, plus what no kube audit says:
 * every rule that allowed the request, so a reader can tell which requests a rule alone allows (removing that rule
 * denies them). rbac-usage.ts reads it to prove each KubeVirt component's rule needed by a flow.
 *
 *   request --authenticate--> user --Impersonate-* checks--> acting user --authorize--> decision
 *                                     |                                        |   admission plugins' checks
 *                                     v                                        v   (OwnerReferencesPermission...)
 *                                  one line per distinct decision, the first time it is made
 *
 * One line per distinct decision (every field but `time` equal), written when first made, so a long run's file
 * stays small: `time` is when a flow first needed it. Access reviews (`kubectl auth can-i`) ask questions and make
 * no request; they are not recorded. A line (fields that would be empty are left out):
 *
 *   {"time":"2026-11-26T10:00:00.000Z",          first time this decision was made (ISO 8601)
 *    "user":"system:serviceaccount:kubevirt:kubevirt-handler","groups":[...],   who is authorized
 *    "impersonatedBy":"...",                     the authenticated user, when `user` is impersonated
 *    "userAgent":"virt-handler/node01",          the request's User-Agent
 *    "source":"request",                         "request" (the request, or one of its Impersonate-* headers) or
 *                                                "admission" (an admission plugin's own check)
 *    "verb":"get","apiGroup":"","resource":"secrets","subresource":"","namespace":"ns","name":"n",  resource request
 *    "path":"/apis",                             a non-resource request's path (instead of the resource fields)
 *    "allowed":true,"reason":"RBAC: allowed by ...",
 *    "rules":[{"kind":"ClusterRole","name":"kubevirt-handler","index":2}]}      every rule that allows it, where
 *                                                written (an aggregated role's rule: in its source role); empty for
 *                                                system:masters and denials
 */
import { closeSync, openSync, readFileSync, writeSync } from "node:fs";
import type { Attributes, Authorizer, AuthUser, Decision, PolicyRule, RbacAuthorizer, RuleRef } from "./rbac.ts";

/** Why a decision was made. */
export type AuditSource = "request" | "admission";

/** One line of the authorization audit. */
export interface AuthorizationAuditEntry {
  readonly time: string;
  readonly user: string;
  readonly groups: readonly string[];
  readonly impersonatedBy?: string;
  readonly userAgent?: string;
  readonly source: AuditSource;
  readonly verb: string;
  readonly apiGroup?: string;
  readonly resource?: string;
  readonly subresource?: string;
  readonly namespace?: string;
  readonly name?: string;
  readonly path?: string;
  readonly allowed: boolean;
  readonly reason?: string;
  readonly rules: readonly RuleRef[];
}

/** The request a recorded decision belongs to. */
export interface AuditContext {
  readonly source: AuditSource;
  readonly userAgent?: string;
  readonly impersonatedBy?: string;
}

/** Appends distinct decisions to a file (synchronously: a killed server loses no line it answered). */
export class AuthorizationAuditLog {
  readonly #fd: number;
  readonly #seen = new Set<string>();
  readonly #now: () => Date;
  #closed = false;

  /** Opens `file` for appending (created 0600 when missing: the audit names users and objects). */
  constructor(file: string, now: () => Date = () => new Date()) {
    this.#fd = openSync(file, "a", 0o600);
    this.#now = now;
  }

  /** Writes `entry` with the current time unless an equal decision was written already. */
  record(entry: Omit<AuthorizationAuditEntry, "time">): void {
    if (this.#closed) return;
    const key = JSON.stringify(entry);
    if (this.#seen.has(key)) return;
    this.#seen.add(key);
    writeSync(this.#fd, `${JSON.stringify({ time: this.#now().toISOString(), ...entry })}\n`);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    closeSync(this.#fd);
  }
}

function entryOf(attrs: Attributes, d: Decision, ctx: AuditContext, rules: RuleRef[]) {
  const what = attrs.resourceRequest
    ? {
        verb: attrs.verb,
        apiGroup: attrs.apiGroup ?? "",
        resource: attrs.resource ?? "",
        ...(attrs.subresource ? { subresource: attrs.subresource } : {}),
        ...(attrs.namespace ? { namespace: attrs.namespace } : {}),
        ...(attrs.name ? { name: attrs.name } : {}),
      }
    : { verb: attrs.verb, path: attrs.path ?? "" };
  return {
    user: attrs.user.username,
    groups: [...attrs.user.groups],
    ...(ctx.impersonatedBy ? { impersonatedBy: ctx.impersonatedBy } : {}),
    ...(ctx.userAgent ? { userAgent: ctx.userAgent } : {}),
    source: ctx.source,
    ...what,
    allowed: d.allowed,
    ...(d.reason ? { reason: d.reason } : {}),
    rules,
  };
}

/**
 * The server's authorizer when it records an audit: decides as `inner`; {@link recordingAuthorizer} gives the view
 * that also writes each decision to `log`, with the rules `rbac` says allow it. Its own `authorize` records nothing
 * (access reviews use it).
 */
export class AuditingAuthorizer implements Authorizer {
  readonly #inner: Authorizer;
  readonly #rbac: RbacAuthorizer;
  readonly #log: AuthorizationAuditLog;

  constructor(inner: Authorizer, rbac: RbacAuthorizer, log: AuthorizationAuditLog) {
    this.#inner = inner;
    this.#rbac = rbac;
    this.#log = log;
  }

  authorize(attrs: Attributes): Decision {
    return this.#inner.authorize(attrs);
  }

  rulesFor(user: AuthUser, namespace: string): PolicyRule[] {
    return this.#inner.rulesFor(user, namespace);
  }

  /** The same authorizer, recording every decision it makes for the request `ctx` describes. */
  recording(ctx: AuditContext): Authorizer {
    return {
      authorize: (attrs) => {
        const d = this.#inner.authorize(attrs);
        this.#log.record(entryOf(attrs, d, ctx, d.allowed ? this.#rbac.allowingRules(attrs) : []));
        return d;
      },
      rulesFor: (user, namespace) => this.#inner.rulesFor(user, namespace),
    };
  }
}

/** `authorizer`, recording the decisions it makes for `ctx` when the server keeps an audit. */
export function recordingAuthorizer(authorizer: Authorizer, ctx: AuditContext): Authorizer {
  return authorizer instanceof AuditingAuthorizer ? authorizer.recording(ctx) : authorizer;
}

/** The audit error: where `file` is not an authorization audit. */
export class AuthorizationAuditFormatError extends Error {
  override readonly name = "AuthorizationAuditFormatError";
}

/**
 * The entries of the audit `file`. A last line cut short (a server killed while writing it) is left out; any other
 * line that is not an entry throws {@link AuthorizationAuditFormatError} naming it.
 */
export function readAuthorizationAudit(file: string): AuthorizationAuditEntry[] {
  const text = readFileSync(file, "utf8");
  // After the last newline: nothing, or a line cut short.
  const complete = text.split("\n").slice(0, -1);
  const out: AuthorizationAuditEntry[] = [];
  complete.forEach((line, i) => {
    if (line.trim() === "") return;
    let e: unknown;
    try {
      e = JSON.parse(line);
    } catch (error) {
      throw new AuthorizationAuditFormatError(`${file}:${i + 1}: not JSON: ${(error as Error).message}`);
    }
    if (!isEntry(e)) throw new AuthorizationAuditFormatError(`${file}:${i + 1}: not an authorization audit entry`);
    out.push(e);
  });
  return out;
}

function isEntry(e: unknown): e is AuthorizationAuditEntry {
  if (typeof e !== "object" || e === null) return false;
  const o = e as Record<string, unknown>;
  return (
    typeof o.time === "string" &&
    typeof o.user === "string" &&
    Array.isArray(o.groups) &&
    typeof o.verb === "string" &&
    typeof o.allowed === "boolean" &&
    Array.isArray(o.rules)
  );
}
