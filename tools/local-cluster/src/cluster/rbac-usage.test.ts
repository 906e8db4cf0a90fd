/**
 * The rule-usage proof's logic: a real API server with an authorization audit decides a component's requests, and
 * rbacUsage finds each rule no request needed alone (wildcards, resourceNames, subresources, an aggregated role's
 * source, a namespaced Role); then its pure parts (flows, Secrets, kubectl, denials) on hand-made entries.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "../apiserver/apiserver.ts";
import { type AuthorizationAuditEntry, readAuthorizationAudit } from "../apiserver/auth/authorization-audit.ts";
import { type Answer, call } from "../apiserver/extensions/testdata/fixtures.ts";
import type { KubeObject } from "../apiserver/types.ts";
import {
  type ComponentAccount,
  componentAccounts,
  componentRules,
  describeRule,
  flowAt,
  formatRbacUsage,
  KUBEVIRT_OWN_SECRETS,
  rbacUsage,
} from "./rbac-usage.ts";

const RBAC = "rbac.authorization.k8s.io/v1";
const role = (kind: "ClusterRole" | "Role", name: string, rules: unknown[], more: Partial<KubeObject> = {}) =>
  ({
    apiVersion: RBAC,
    kind,
    metadata: { name, ...(kind === "Role" ? { namespace: "ops" } : {}) },
    rules,
    ...more,
  }) as KubeObject;
const subject = { kind: "ServiceAccount", name: "robot", namespace: "ops" };
const binding = (kind: "ClusterRoleBinding" | "RoleBinding", name: string, roleKind: string): KubeObject => ({
  apiVersion: RBAC,
  kind,
  metadata: { name, ...(kind === "RoleBinding" ? { namespace: "ops" } : {}) },
  roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: roleKind, name },
  subjects: [subject],
});

/** A component's release RBAC, as deploy/ writes it. */
const OBJECTS: KubeObject[] = [
  {
    apiVersion: "v1",
    kind: "ServiceAccount",
    metadata: { name: "robot", namespace: "ops", labels: { "app.kubernetes.io/component": "robot" } },
  },
  role("ClusterRole", "robot", [
    // 0: shadowed by rule 1 (any configmap): no request needs it alone.
    { apiGroups: [""], resources: ["configmaps"], resourceNames: ["cfg-a"], verbs: ["get"] },
    { apiGroups: [""], resources: ["configmaps"], verbs: ["get", "list"] },
    // 2: a subresource only.
    { apiGroups: [""], resources: ["pods/status"], verbs: ["get"] },
    // 3: every resource of a group.
    { apiGroups: ["apps"], resources: ["*"], verbs: ["list"] },
    // 4: never asked for.
    { apiGroups: [""], resources: ["secrets"], verbs: ["create"] },
  ]),
  binding("ClusterRoleBinding", "robot", "ClusterRole"),
  role("ClusterRole", "robot-aggregate", [], {
    aggregationRule: { clusterRoleSelectors: [{ matchLabels: { "example.com/aggregate-to-robot": "true" } }] },
  }),
  binding("ClusterRoleBinding", "robot-aggregate", "ClusterRole"),
  role(
    "ClusterRole",
    "robot-extra",
    [
      { apiGroups: [""], resources: ["services"], verbs: ["list"] },
      { apiGroups: [""], resources: ["nodes"], verbs: ["get"] },
    ],
    { metadata: { name: "robot-extra", labels: { "example.com/aggregate-to-robot": "true" } } },
  ),
  role("Role", "robot", [
    { apiGroups: ["coordination.k8s.io"], resources: ["leases"], resourceNames: ["lock"], verbs: ["get"] },
  ]),
  binding("RoleBinding", "robot", "Role"),
  // Not bound to the component: not its rule.
  role("ClusterRole", "unrelated", [{ apiGroups: [""], resources: ["pods"], verbs: ["delete"] }]),
  // Bound to every authenticated user (a users' role): not the component's rule either.
  role("ClusterRole", "everyone", [{ apiGroups: [""], resources: ["namespaces"], verbs: ["get"] }]),
  {
    apiVersion: RBAC,
    kind: "ClusterRoleBinding",
    metadata: { name: "everyone" },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "everyone" },
    subjects: [{ kind: "Group", name: "system:authenticated" }],
  },
];

const PATHS = {
  ClusterRole: () => "/apis/rbac.authorization.k8s.io/v1/clusterroles",
  ClusterRoleBinding: () => "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
  Role: (o: KubeObject) => `/apis/rbac.authorization.k8s.io/v1/namespaces/${o.metadata.namespace}/roles`,
  RoleBinding: (o: KubeObject) => `/apis/rbac.authorization.k8s.io/v1/namespaces/${o.metadata.namespace}/rolebindings`,
  ServiceAccount: (o: KubeObject) => `/api/v1/namespaces/${o.metadata.namespace}/serviceaccounts`,
} as Record<string, (o: KubeObject) => string>;

let api: ApiServerHandle;
let dir: string;
let audit: string;
let robotToken: string;
const account: ComponentAccount = { component: "robot", namespace: "ops", serviceAccount: "robot" };

function asRobot(method: string, path: string, body?: unknown, agent = "robot/1.0"): Promise<Answer> {
  return call(api, method, path, body, "application/json", {
    authorization: `Bearer ${robotToken}`,
    "user-agent": agent,
  });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "kvt-rbac-usage-"));
  audit = join(dir, "audit.jsonl");
  api = await startApiServer({ inMemory: true, authorizationAuditLog: audit });
  expect((await call(api, "POST", "/api/v1/namespaces", { metadata: { name: "ops" } })).code).toBe(201);
  for (const o of OBJECTS) expect((await call(api, "POST", PATHS[o.kind ?? ""](o), o)).code, o.kind).toBe(201);
  const tr = await call(api, "POST", "/api/v1/namespaces/ops/serviceaccounts/robot/token", {
    apiVersion: "authentication.k8s.io/v1",
    kind: "TokenRequest",
    spec: {},
  });
  robotToken = (tr.body.status as { token: string }).token;
}, 60_000);

afterAll(async () => {
  await api?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const mine = (entries: AuthorizationAuditEntry[]) =>
  entries.filter((e) => e.user === "system:serviceaccount:ops:robot" && e.userAgent === "robot/1.0");

describe("which rules a component's requests need (a real API server's audit)", () => {
  it("records what RBAC allowed by which rules, and finds the rules no request needed alone", async () => {
    const allowed = async (method: string, path: string) => {
      const r = await asRobot(method, path);
      expect(r.code, `${method} ${path}: ${r.text}`).not.toBe(403);
    };
    await allowed("GET", "/api/v1/namespaces/ops/configmaps/cfg-a");
    await allowed("GET", "/api/v1/namespaces/ops/configmaps/cfg-a");
    await allowed("GET", "/api/v1/namespaces/ops/configmaps");
    await allowed("GET", "/api/v1/namespaces/ops/pods/p/status");
    await allowed("GET", "/apis/apps/v1/namespaces/ops/deployments");
    await allowed("GET", "/api/v1/services");
    await allowed("GET", "/apis/coordination.k8s.io/v1/namespaces/ops/leases/lock");
    expect((await asRobot("GET", "/api/v1/namespaces/ops/secrets")).code).toBe(403);
    // A question, not a request for secrets: only the review's own create is recorded.
    const review = await asRobot("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {
      apiVersion: "authorization.k8s.io/v1",
      kind: "SelfSubjectAccessReview",
      spec: { resourceAttributes: { verb: "create", resource: "secrets", namespace: "ops" } },
    });
    expect(review.body.status).toMatchObject({ allowed: true });
    // The admin acting as the robot: the robot is authorized, the admin named as the impersonator.
    const imp = await call(api, "GET", "/api/v1/namespaces/ops/configmaps", undefined, "application/json", {
      "impersonate-user": "system:serviceaccount:ops:robot",
    });
    expect(imp.code).toBe(200);

    const entries = readAuthorizationAudit(audit);
    const robot = mine(entries);
    const find = (verb: string, resource: string, name?: string) =>
      robot.filter((e) => e.verb === verb && e.resource === resource && e.name === name);
    // Deduplicated: the repeated get is one line, allowed by both configmap rules.
    expect(find("get", "configmaps", "cfg-a")).toHaveLength(1);
    expect(find("get", "configmaps", "cfg-a")[0]?.rules).toEqual([
      { kind: "ClusterRole", name: "robot", index: 0 },
      { kind: "ClusterRole", name: "robot", index: 1 },
    ]);
    expect(find("get", "pods", "p")[0]).toMatchObject({ subresource: "status", rules: [{ name: "robot", index: 2 }] });
    // The aggregated role's rule is where its source role holds it.
    expect(find("list", "services")[0]?.rules).toEqual([{ kind: "ClusterRole", name: "robot-extra", index: 0 }]);
    expect(find("get", "leases", "lock")[0]?.rules).toEqual([
      { kind: "Role", namespace: "ops", name: "robot", index: 0 },
    ]);
    expect(find("list", "secrets")[0]).toMatchObject({ allowed: false, rules: [] });
    expect(robot.filter((e) => e.verb === "create" && e.resource === "secrets")).toEqual([]);
    expect(find("create", "selfsubjectaccessreviews")[0]?.rules).toEqual([
      expect.objectContaining({ kind: "ClusterRole", name: "system:basic-user" }),
    ]);
    expect(entries.find((e) => e.impersonatedBy === "kubernetes-admin")).toMatchObject({
      user: "system:serviceaccount:ops:robot",
      verb: "list",
      resource: "configmaps",
      rules: [{ kind: "ClusterRole", name: "robot", index: 1 }],
    });

    expect(componentAccounts(OBJECTS)).toEqual([account]);
    const report = rbacUsage(OBJECTS, [account], entries, [], {});
    const unused = report.rules.filter((r) => !r.neededBy).map(describeRule);
    expect(unused).toEqual([
      'ClusterRole robot rule 0: verbs get on "" configmaps resourceNames cfg-a',
      'ClusterRole robot rule 4: verbs create on "" secrets',
      'ClusterRole robot-extra rule 1: verbs get on "" nodes',
    ]);
    expect(report.rules).toHaveLength(8);
    // Finer than rules: rule 1 allows get and list of configmaps, and both were asked for; rule 3's wildcard is no pair.
    const grants = (name: string, index: number) =>
      report.rules.find((r) => r.ref.name === name && r.ref.index === index)?.unusedGrants;
    expect(grants("robot", 1)).toEqual([]);
    expect(grants("robot", 3)).toEqual([]);
    expect(grants("robot", 4)).toEqual(["create secrets"]);
    expect(grants("robot", 2)).toEqual([]);
    expect(report.denied.map((d) => d.entry.resource)).toEqual(["secrets"]);
    expect(formatRbacUsage(report, () => "deploy/robot.yaml").ok).toBe(false);
  });

  it("removing a rule a request needed alone denies that request (where an aggregated role's source holds it too)", async () => {
    const without = async (name: string, index: number) => {
      const path = `/apis/rbac.authorization.k8s.io/v1/clusterroles/${name}`;
      const role = (await call(api, "GET", path)).body as { rules: unknown[] };
      role.rules.splice(index, 1);
      expect((await call(api, "PUT", path, role)).code).toBe(200);
    };
    expect((await asRobot("GET", "/api/v1/namespaces/ops/pods/p/status")).code).not.toBe(403);
    await without("robot", 2);
    expect((await asRobot("GET", "/api/v1/namespaces/ops/pods/p/status")).code).toBe(403);
    expect((await asRobot("GET", "/api/v1/services")).code).toBe(200);
    await without("robot-extra", 0);
    expect((await asRobot("GET", "/api/v1/services")).code).toBe(403);
    // Rule 0 (cfg-a by name) was never needed alone: without it the request still passes, by rule 1.
    await without("robot", 0);
    expect((await asRobot("GET", "/api/v1/namespaces/ops/configmaps/cfg-a")).code).not.toBe(403);
  });
});

describe("rbacUsage() on hand-made entries", () => {
  const user = "system:serviceaccount:ops:robot";
  const entry = (time: string, more: Partial<AuthorizationAuditEntry>): AuthorizationAuditEntry => ({
    time,
    user,
    groups: [],
    userAgent: "robot/1.0",
    source: "request",
    verb: "get",
    apiGroup: "",
    resource: "configmaps",
    namespace: "ops",
    name: "x",
    allowed: true,
    rules: [],
    ...more,
  });
  const flows = [
    { name: "e2e/a.e2e.test.ts", start: Date.parse("2026-11-26T10:01:00Z"), end: Date.parse("2026-11-26T10:02:00Z") },
    { name: "e2e/b.e2e.test.ts", start: Date.parse("2026-11-26T10:03:00Z"), end: Date.parse("2026-11-26T10:04:00Z") },
  ];

  it("names the flow: the e2e file running, the one before, or the cluster's start-up", () => {
    expect(flowAt(flows, Date.parse("2026-11-26T10:00:00Z"))).toBe("cluster start-up (before the first e2e file)");
    expect(flowAt(flows, Date.parse("2026-11-26T10:03:30Z"))).toBe("e2e/b.e2e.test.ts");
    expect(flowAt(flows, Date.parse("2026-11-26T10:02:30Z"))).toBe("e2e/a.e2e.test.ts (after it ended)");
  });

  it("takes the first request that only one rule allowed, and not kubectl's with the component's kubeconfig", () => {
    const cm = { kind: "ClusterRole" as const, name: "robot", index: 1 };
    const report = rbacUsage(
      OBJECTS,
      [account],
      [
        entry("2026-11-26T10:03:10Z", { rules: [cm], name: "late" }),
        entry("2026-11-26T10:01:10Z", { rules: [cm], name: "kubectl", userAgent: "kubectl/v1.35.0 (linux/amd64)" }),
        entry("2026-11-26T10:01:20Z", { rules: [cm], name: "early" }),
      ],
      flows,
      {},
    );
    const needed = report.rules.filter((r) => r.neededBy);
    expect(needed).toHaveLength(1);
    expect(needed[0]?.neededBy).toMatchObject({ flow: "e2e/a.e2e.test.ts", entry: { name: "early" } });
  });

  it("flags a Secret read outside the component's own, by any verb that reads, also impersonating", () => {
    const secret = (more: Partial<AuthorizationAuditEntry>) =>
      entry("2026-11-26T10:01:30Z", { resource: "secrets", ...more });
    const report = rbacUsage(
      OBJECTS,
      [account],
      [
        secret({ name: "mine" }),
        secret({ name: "theirs" }),
        secret({ verb: "list", name: undefined }),
        secret({ verb: "watch", name: "mine" }),
        secret({ user: "alice", impersonatedBy: user, name: "alices" }),
        secret({ name: "denied", allowed: false }),
        secret({ verb: "update", name: "written" }),
      ],
      flows,
      { robot: [{ namespace: "ops", names: ["mine"] }] },
    );
    expect(report.foreignSecretReads.map((s) => `${s.entry.verb} ${s.entry.name ?? "*"}`)).toEqual([
      "get theirs",
      "list *",
      "watch mine",
      "get alices",
    ]);
    expect(report.denied.map((d) => d.entry.name)).toEqual(["denied"]);
    expect(formatRbacUsage(report, () => "").text).toContain(
      "SECRET  robot read a Secret it does not own: get secrets ops/theirs by robot/1.0; flow: e2e/a.e2e.test.ts",
    );
  });

  it("knows the KubeVirt components' own Secrets", () => {
    const report = rbacUsage(
      [],
      [
        { component: "virt-handler", namespace: "kubevirt", serviceAccount: "kubevirt-handler" },
        { component: "virt-controller", namespace: "kubevirt", serviceAccount: "kubevirt-controller" },
      ],
      [
        // The migration secret goes handler to handler now: virt-handler reads no Secret at all.
        entry("2026-11-26T10:01:00Z", {
          user: "system:serviceaccount:kubevirt:kubevirt-handler",
          resource: "secrets",
          namespace: "default",
          name: "kubevirt-migration-0b6f7a4e-6c1d-4a53-9d0e-2f7b1c9a8e11",
        }),
        entry("2026-11-26T10:01:00Z", {
          user: "system:serviceaccount:kubevirt:kubevirt-controller",
          resource: "secrets",
          namespace: "kubevirt",
          name: "kubevirt-ca",
        }),
        entry("2026-11-26T10:01:00Z", {
          user: "system:serviceaccount:kubevirt:kubevirt-controller",
          resource: "secrets",
          namespace: "default",
          name: "kubevirt-ca",
        }),
      ],
      [],
      KUBEVIRT_OWN_SECRETS,
    );
    expect(report.foreignSecretReads.map((s) => `${s.component} ${s.entry.namespace}/${s.entry.name}`)).toEqual([
      "virt-handler default/kubevirt-migration-0b6f7a4e-6c1d-4a53-9d0e-2f7b1c9a8e11",
      "virt-controller default/kubevirt-ca",
    ]);
  });

  it("exempts a rule by its content, and calls an exemption stale once a flow needs the rule or it names none", () => {
    const exempt = {
      component: "robot",
      role: "ClusterRole robot-extra",
      resources: ["nodes"],
      verbs: ["get"],
      why: "only real nodes",
    };
    const ghost = { ...exempt, resources: ["ghosts"] };
    const services = { kind: "ClusterRole" as const, name: "robot-extra", index: 0 };
    const entries = [entry("2026-11-26T10:01:10Z", { verb: "list", resource: "services", rules: [services] })];
    const report = rbacUsage(OBJECTS, [account], entries, flows, {}, [exempt, ghost]);
    expect(report.rules.find((r) => r.exempt)?.ref).toEqual({ kind: "ClusterRole", name: "robot-extra", index: 1 });
    expect(report.staleExemptions).toEqual([ghost]);
    const text = formatRbacUsage(report, () => "").text;
    expect(text).toContain('exempt  robot: ClusterRole robot-extra rule 1: verbs get on "" nodes: only real nodes');
    expect(text).toContain(
      "STALE   exemption of robot ClusterRole robot-extra: a flow needs the rule, or no such rule",
    );
    const nodes = { kind: "ClusterRole" as const, name: "robot-extra", index: 1 };
    const used = rbacUsage(
      OBJECTS,
      [account],
      [entry("2026-11-26T10:01:20Z", { resource: "nodes", rules: [nodes] })],
      flows,
      {},
      [exempt],
    );
    expect(formatRbacUsage(used, () => "").text).toContain("STALE   exemption of robot ClusterRole robot-extra");
  });

  it("refuses a binding whose role is not in the set", () => {
    const broken = OBJECTS.filter((o) => !(o.kind === "Role" && o.metadata.name === "robot"));
    expect(() => componentRules(broken, account)).toThrow("RoleBinding robot: its Role robot is not in the set");
  });
});
