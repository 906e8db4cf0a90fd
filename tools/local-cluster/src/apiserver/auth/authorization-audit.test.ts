import { appendFileSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  AuditingAuthorizer,
  AuthorizationAuditFormatError,
  AuthorizationAuditLog,
  readAuthorizationAudit,
  recordingAuthorizer,
} from "./authorization-audit.ts";
import type { Attributes, Authorizer, RbacAuthorizer, RuleRef } from "./rbac.ts";

let dir: string;
let file: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "kvt-authz-audit-"));
  file = join(dir, "audit.jsonl");
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const robot = { username: "system:serviceaccount:ops:robot", groups: ["system:serviceaccounts"] };
const getCm = (name: string): Attributes => ({
  user: robot,
  verb: "get",
  resourceRequest: true,
  apiGroup: "",
  resource: "configmaps",
  namespace: "ops",
  name,
});
const ref: RuleRef = { kind: "ClusterRole", name: "robot", index: 0 };

/** An authorizer allowing configmap `a` only, by `ref`. */
function fakes(): { inner: Authorizer; rbac: RbacAuthorizer } {
  const inner: Authorizer = {
    authorize: (a) =>
      a.name === "a" ? { allowed: true, reason: "RBAC: allowed by test" } : { allowed: false, reason: "" },
    rulesFor: () => [],
  };
  const rbac = { allowingRules: (a: Attributes) => (a.name === "a" ? [ref] : []) } as unknown as RbacAuthorizer;
  return { inner, rbac };
}

describe("the authorization audit", () => {
  it("writes each distinct decision once, with its time, the request's agent and the allowing rules", () => {
    let t = Date.parse("2026-11-26T10:00:00Z");
    const log = new AuthorizationAuditLog(file, () => new Date(t++));
    const { inner, rbac } = fakes();
    const az = recordingAuthorizer(new AuditingAuthorizer(inner, rbac, log), { source: "request", userAgent: "ua/1" });
    expect(az.authorize(getCm("a")).allowed).toBe(true);
    expect(az.authorize(getCm("a")).allowed).toBe(true);
    expect(az.authorize(getCm("b")).allowed).toBe(false);
    log.close();
    expect(
      readFileSync(file, "utf8")
        .trim()
        .split("\n")
        .map((l): unknown => JSON.parse(l) as unknown),
    ).toEqual([
      {
        time: "2026-11-26T10:00:00.000Z",
        user: robot.username,
        groups: robot.groups,
        userAgent: "ua/1",
        source: "request",
        verb: "get",
        apiGroup: "",
        resource: "configmaps",
        namespace: "ops",
        name: "a",
        allowed: true,
        reason: "RBAC: allowed by test",
        rules: [ref],
      },
      {
        time: "2026-11-26T10:00:00.001Z",
        user: robot.username,
        groups: robot.groups,
        userAgent: "ua/1",
        source: "request",
        verb: "get",
        apiGroup: "",
        resource: "configmaps",
        namespace: "ops",
        name: "b",
        allowed: false,
        rules: [],
      },
    ]);
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });

  it("records nothing through the authorizer itself (access reviews ask, they do not act)", () => {
    const log = new AuthorizationAuditLog(file);
    const { inner, rbac } = fakes();
    const az = new AuditingAuthorizer(inner, rbac, log);
    expect(az.authorize(getCm("a")).allowed).toBe(true);
    log.close();
    expect(readFileSync(file, "utf8")).toBe("");
  });

  it("leaves a server without an audit alone", () => {
    const { inner } = fakes();
    expect(recordingAuthorizer(inner, { source: "request" })).toBe(inner);
  });

  it("reads entries back, leaving out a last line cut short, and names a damaged line", () => {
    const log = new AuthorizationAuditLog(file);
    const { inner, rbac } = fakes();
    recordingAuthorizer(new AuditingAuthorizer(inner, rbac, log), { source: "admission" }).authorize(getCm("a"));
    log.close();
    appendFileSync(file, '{"time":"2026-11-26T10:00:01.000Z","us');
    const entries = readAuthorizationAudit(file);
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ source: "admission", name: "a", rules: [ref] });
    writeFileSync(file, '{"time":"x"}\n{"nope\n');
    expect(() => readAuthorizationAudit(file)).toThrow(AuthorizationAuditFormatError);
    expect(() => readAuthorizationAudit(file)).toThrow(`${file}:1: not an authorization audit entry`);
  });
});
