import { describe, expect, it } from "vitest";
import type { RequestInfo } from "../http/request-info.ts";
import { parseResourcePath } from "../http/request-info.ts";
import { type Attributes, type PolicyRule, ruleAllows, subjectMatches } from "./rbac.ts";
import { forbiddenError, forbiddenMessage, resourceAttributes } from "./request-attributes.ts";

const alice = { username: "alice", groups: ["devs", "system:authenticated"] };
const res = (verb: string, resource: string, more: Partial<Attributes> = {}): Attributes => ({
  user: alice,
  verb,
  resourceRequest: true,
  apiGroup: "",
  resource,
  ...more,
});

describe("ruleAllows()", () => {
  const cases: [string, PolicyRule, Attributes, boolean][] = [
    ["exact verb, group, resource", { verbs: ["get"], apiGroups: [""], resources: ["pods"] }, res("get", "pods"), true],
    ["another verb", { verbs: ["get"], apiGroups: [""], resources: ["pods"] }, res("delete", "pods"), false],
    ["verb *", { verbs: ["*"], apiGroups: [""], resources: ["pods"] }, res("deletecollection", "pods"), true],
    ["another group", { verbs: ["get"], apiGroups: ["apps"], resources: ["pods"] }, res("get", "pods"), false],
    ["group *", { verbs: ["get"], apiGroups: ["*"], resources: ["pods"] }, res("get", "pods"), true],
    [
      "resource * covers subresources",
      { verbs: ["get"], apiGroups: [""], resources: ["*"] },
      res("get", "pods", { subresource: "log" }),
      true,
    ],
    [
      "pods does not cover pods/log",
      { verbs: ["get"], apiGroups: [""], resources: ["pods"] },
      res("get", "pods", { subresource: "log" }),
      false,
    ],
    [
      "pods/log",
      { verbs: ["get"], apiGroups: [""], resources: ["pods/log"] },
      res("get", "pods", { subresource: "log" }),
      true,
    ],
    [
      "pods/log does not cover pods",
      { verbs: ["get"], apiGroups: [""], resources: ["pods/log"] },
      res("get", "pods"),
      false,
    ],
    [
      "*/status",
      { verbs: ["patch"], apiGroups: [""], resources: ["*/status"] },
      res("patch", "nodes", { subresource: "status" }),
      true,
    ],
    [
      "virtualmachineinstances/pause in subresources.kubevirt.io",
      { verbs: ["update"], apiGroups: ["subresources.kubevirt.io"], resources: ["virtualmachineinstances/pause"] },
      res("update", "virtualmachineinstances", {
        apiGroup: "subresources.kubevirt.io",
        subresource: "pause",
        name: "v",
      }),
      true,
    ],
    [
      "resourceNames: the name",
      { verbs: ["get"], apiGroups: [""], resources: ["secrets"], resourceNames: ["a"] },
      res("get", "secrets", { name: "a" }),
      true,
    ],
    [
      "resourceNames: another name",
      { verbs: ["get"], apiGroups: [""], resources: ["secrets"], resourceNames: ["a"] },
      res("get", "secrets", { name: "b" }),
      false,
    ],
    [
      "resourceNames: no name (list)",
      { verbs: ["list"], apiGroups: [""], resources: ["secrets"], resourceNames: ["a"] },
      res("list", "secrets"),
      false,
    ],
    [
      "nonResourceURLs exact",
      { verbs: ["get"], nonResourceURLs: ["/version"] },
      { user: alice, verb: "get", resourceRequest: false, path: "/version" },
      true,
    ],
    [
      "nonResourceURLs prefix*",
      { verbs: ["get"], nonResourceURLs: ["/apis/*"] },
      { user: alice, verb: "get", resourceRequest: false, path: "/apis/apps/v1" },
      true,
    ],
    [
      "nonResourceURLs another path",
      { verbs: ["get"], nonResourceURLs: ["/version"] },
      { user: alice, verb: "get", resourceRequest: false, path: "/metrics" },
      false,
    ],
    ["a URL rule allows no resource", { verbs: ["*"], nonResourceURLs: ["*"] }, res("get", "pods"), false],
    [
      "a resource rule allows no URL",
      { verbs: ["*"], apiGroups: ["*"], resources: ["*"] },
      { user: alice, verb: "get", resourceRequest: false, path: "/version" },
      false,
    ],
  ];
  it.each(cases)("%s", (_name, rule, attrs, allowed) => {
    expect(ruleAllows(attrs, rule)).toBe(allowed);
  });
});

describe("subjectMatches()", () => {
  const sa = { username: "system:serviceaccount:ns1:robot", groups: ["system:serviceaccounts"] };
  it.each([
    [{ kind: "User", name: "alice" }, alice, "", true],
    [{ kind: "User", name: "bob" }, alice, "", false],
    [{ kind: "Group", name: "devs" }, alice, "", true],
    [{ kind: "ServiceAccount", name: "robot", namespace: "ns1" }, sa, "", true],
    [{ kind: "ServiceAccount", name: "robot" }, sa, "ns1", true],
    [{ kind: "ServiceAccount", name: "robot" }, sa, "ns2", false],
    [{ kind: "ServiceAccount", name: "robot" }, sa, "", false],
  ])("%j for %j in binding namespace %j: %s", (subject, user, ns, want) => {
    expect(subjectMatches(subject, user, ns)).toBe(want);
  });
});

describe("resourceAttributes()", () => {
  const info = (path: string): RequestInfo => parseResourcePath(path)!;
  const q = (s = ""): URLSearchParams => new URLSearchParams(s);
  it.each([
    ["GET", "/api/v1/secrets", "", "list", undefined],
    ["GET", "/api/v1/namespaces/a/secrets/s", "", "get", "s"],
    ["GET", "/api/v1/namespaces/a/secrets", "watch=true", "watch", undefined],
    ["GET", "/api/v1/watch/namespaces/a/secrets", "", "watch", undefined],
    ["GET", "/api/v1/namespaces/a/secrets", "fieldSelector=metadata.name%3Ds", "list", "s"],
    ["POST", "/api/v1/namespaces/a/secrets", "", "create", undefined],
    ["PUT", "/api/v1/namespaces/a/secrets/s", "", "update", "s"],
    ["PATCH", "/api/v1/namespaces/a/secrets/s", "", "patch", "s"],
    ["DELETE", "/api/v1/namespaces/a/secrets/s", "", "delete", "s"],
    ["DELETE", "/api/v1/namespaces/a/secrets", "", "deletecollection", undefined],
  ])("%s %s?%s is %s", (method, path, query, verb, name) => {
    const a = resourceAttributes(alice, method, info(path), q(query));
    expect(a.verb).toBe(verb);
    expect(a.name).toBe(name);
  });

  it("puts a request on the namespace object in that namespace, as RequestInfoFactory does", () => {
    const a = resourceAttributes(alice, "DELETE", info("/api/v1/namespaces/team"), q());
    expect(a).toMatchObject({ verb: "delete", resource: "namespaces", name: "team", namespace: "team" });
  });

  it("keeps the subresource of pods/log", () => {
    const a = resourceAttributes(alice, "GET", info("/api/v1/namespaces/a/pods/p/log"), q());
    expect(a).toMatchObject({ verb: "get", resource: "pods", subresource: "log", namespace: "a", name: "p" });
  });
});

describe("forbidden messages (kube-apiserver's)", () => {
  it("at the cluster scope and in a namespace", () => {
    expect(forbiddenMessage(res("list", "secrets"))).toBe(
      'User "alice" cannot list resource "secrets" in API group "" at the cluster scope',
    );
    expect(forbiddenMessage(res("get", "pods", { subresource: "log", namespace: "ns" }))).toBe(
      'User "alice" cannot get resource "pods/log" in API group "" in the namespace "ns"',
    );
  });

  it("as a Status: the group-qualified resource, the name when there is one, and the reason", () => {
    const e = forbiddenError(
      res("update", "virtualmachineinstances", {
        apiGroup: "subresources.kubevirt.io",
        subresource: "pause",
        name: "v",
        namespace: "d",
      }),
      "",
    );
    expect(e.status).toEqual({
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message:
        'virtualmachineinstances.subresources.kubevirt.io "v" is forbidden: User "alice" cannot update resource "virtualmachineinstances/pause" in API group "subresources.kubevirt.io" in the namespace "d"',
      reason: "Forbidden",
      details: { name: "v", group: "subresources.kubevirt.io", kind: "virtualmachineinstances" },
      code: 403,
    });
    expect(forbiddenError(res("list", "secrets"), "RBAC: role x not found").message).toBe(
      'secrets is forbidden: User "alice" cannot list resource "secrets" in API group "" at the cluster scope: RBAC: role x not found',
    );
    expect(forbiddenError({ user: alice, verb: "get", resourceRequest: false, path: "/metrics" }, "").message).toBe(
      'forbidden: User "alice" cannot get path "/metrics"',
    );
  });
});
