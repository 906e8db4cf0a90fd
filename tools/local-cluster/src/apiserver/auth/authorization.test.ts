/**
 * RBAC enforced by a real API server, with the release's roles (deploy/, applied as the local cluster applies them)
 * and the bootstrap roles: each component's credentials do what its role grants and nothing else. Each denial here
 * was allowed before the server had an authorizer (every authenticated request was).
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { request } from "node:https";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { kubeConfigFromFile, RestClient } from "@kvt/kube";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { componentIdentities, ensureComponentTokens } from "../../cluster/component-identities.ts";
import { applyReleaseRbac } from "../../cluster/release-rbac.ts";
import { type ApiServerHandle, startApiServer } from "../apiserver.ts";
import { type Answer, call, eventually } from "../extensions/testdata/fixtures.ts";
import { type Kubectl, kubectl } from "../testdata/kubectl.ts";

const PROJECT_ROOT = fileURLToPath(new URL("../../../../../", import.meta.url));
let api: ApiServerHandle;
let dir: string;
let k: Kubectl;
const token: Record<string, string> = {};

const HANDLER = "system:serviceaccount:kubevirt:kubevirt-handler";

function accountToken(sa: string): string {
  const kc = parse(readFileSync(join(dirname(api.kubeconfigPath), `kubeconfig-${sa}`), "utf8")) as {
    users: { user: { token: string } }[];
  };
  return kc.users[0].user.token;
}

/** A request with `who`'s token (and any impersonation headers). */
function as(
  who: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Answer> {
  const ct = method === "PATCH" ? "application/merge-patch+json" : "application/json";
  return call(api, method, path, body, ct, { authorization: `Bearer ${token[who]}`, ...headers });
}

function expectForbidden(r: Answer, message: string): void {
  expect(r.code, r.text).toBe(403);
  expect(r.body).toMatchObject({ kind: "Status", status: "Failure", reason: "Forbidden", code: 403, message });
}

function expectAllowed(r: Answer): void {
  expect(r.code, r.text).not.toBe(403);
  expect(r.code, r.text).toBeLessThan(500);
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "kvt-rbac-"));
  const tokenFile = join(dir, "token-auth.csv");
  const ids = ensureComponentTokens(tokenFile, componentIdentities(["node01"]));
  api = await startApiServer({ inMemory: true, tokenAuthFile: tokenFile });
  const tokenOf = (user: string): string => ids.find((t) => t.username === user)?.token ?? "";
  token.scheduler = tokenOf("system:kube-scheduler");
  token.node01 = tokenOf("system:node:node01");
  for (const sa of ["kubevirt-apiserver", "kubevirt-controller", "kubevirt-handler"]) token[sa] = accountToken(sa);
  token.admin = api.token;
  expect((await call(api, "POST", "/api/v1/namespaces", { metadata: { name: "kubevirt" } })).code).toBe(201);
  await applyReleaseRbac(new RestClient(kubeConfigFromFile(api.kubeconfigPath)), PROJECT_ROOT);
  k = kubectl(api.kubeconfigPath);
}, 60_000);

afterAll(async () => {
  k?.cleanup();
  await api?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("virt-handler's ServiceAccount (deploy/virt-handler/rbac.yaml)", () => {
  it("cannot list Secrets cluster-wide nor in a namespace", async () => {
    expectForbidden(
      await as("kubevirt-handler", "GET", "/api/v1/secrets"),
      `secrets is forbidden: User "${HANDLER}" cannot list resource "secrets" in API group "" at the cluster scope`,
    );
    expectForbidden(
      await as("kubevirt-handler", "GET", "/api/v1/namespaces/default/secrets?watch=true"),
      `secrets is forbidden: User "${HANDLER}" cannot watch resource "secrets" in API group "" in the namespace "default"`,
    );
  });

  it("cannot create or delete namespaces", async () => {
    expectForbidden(
      await as("kubevirt-handler", "POST", "/api/v1/namespaces", { metadata: { name: "evil" } }),
      `namespaces is forbidden: User "${HANDLER}" cannot create resource "namespaces" in API group "" at the cluster scope`,
    );
    expectForbidden(
      await as("kubevirt-handler", "DELETE", "/api/v1/namespaces/default"),
      `namespaces "default" is forbidden: User "${HANDLER}" cannot delete resource "namespaces" in API group "" in the namespace "default"`,
    );
    expect((await call(api, "GET", "/api/v1/namespaces/default")).body.status).toEqual({ phase: "Active" });
  });

  it("does what its role grants: VMI patches, node labels; no Secret, not node status", async () => {
    expectForbidden(
      await as("kubevirt-handler", "GET", "/api/v1/namespaces/default/secrets/kubevirt-migration-x"),
      `secrets "kubevirt-migration-x" is forbidden: User "${HANDLER}" cannot get resource "secrets" in API group "" in the namespace "default"`,
    );
    expectAllowed(
      await as("kubevirt-handler", "PATCH", "/apis/kubevirt.io/v1/namespaces/default/virtualmachineinstances/v", {}),
    );
    expectAllowed(await as("kubevirt-handler", "PATCH", "/api/v1/nodes/node01", {}));
    // Device capacity is the kubelet's (device plugins), so virt-handler no longer writes a Node's status.
    expectForbidden(
      await as("kubevirt-handler", "PATCH", "/api/v1/nodes/node01/status", {}),
      `nodes "node01" is forbidden: User "${HANDLER}" cannot patch resource "nodes/status" in API group "" at the cluster scope`,
    );
    expectForbidden(
      await as("kubevirt-handler", "DELETE", "/api/v1/nodes/node01"),
      `nodes "node01" is forbidden: User "${HANDLER}" cannot delete resource "nodes" in API group "" at the cluster scope`,
    );
  });

  it("cannot impersonate anyone", async () => {
    expectForbidden(
      await as("kubevirt-handler", "GET", "/api/v1/pods", undefined, {
        "impersonate-user": "system:serviceaccount:kubevirt:kubevirt-controller",
      }),
      `serviceaccounts "kubevirt-controller" is forbidden: User "${HANDLER}" cannot impersonate resource "serviceaccounts" in API group "" in the namespace "kubevirt"`,
    );
    expectForbidden(
      await as("kubevirt-handler", "GET", "/api/v1/pods", undefined, {
        "impersonate-user": "admin",
        "impersonate-group": "system:masters",
      }),
      `users "admin" is forbidden: User "${HANDLER}" cannot impersonate resource "users" in API group "" at the cluster scope`,
    );
  });
});

describe("impersonation", () => {
  it("an impersonated ServiceAccount gets its own permissions: it cannot read Secrets", async () => {
    const sa = "system:serviceaccount:default:default";
    expectForbidden(
      await as("admin", "GET", "/api/v1/namespaces/default/secrets", undefined, { "impersonate-user": sa }),
      `secrets is forbidden: User "${sa}" cannot list resource "secrets" in API group "" in the namespace "default"`,
    );
    expectForbidden(
      await as("admin", "GET", "/api/v1/secrets", undefined, { "impersonate-user": sa }),
      `secrets is forbidden: User "${sa}" cannot list resource "secrets" in API group "" at the cluster scope`,
    );
  });

  it("virt-api may act as its caller, and then has the caller's permissions only", async () => {
    const r = await as("kubevirt-apiserver", "GET", "/api/v1/namespaces/default/secrets", undefined, {
      "impersonate-user": "alice",
      "impersonate-group": "devs",
    });
    expectForbidden(
      r,
      'secrets is forbidden: User "alice" cannot list resource "secrets" in API group "" in the namespace "default"',
    );
    expectForbidden(
      await as("kubevirt-apiserver", "GET", "/api/v1/secrets"),
      'secrets is forbidden: User "system:serviceaccount:kubevirt:kubevirt-apiserver" cannot list resource "secrets" in API group "" at the cluster scope',
    );
  });
});

describe("the scheduler (system:kube-scheduler) and a kubelet (system:node:node01 in system:nodes)", () => {
  it("the scheduler binds pods but cannot delete them nor read Secrets", async () => {
    expectAllowed(await as("scheduler", "GET", "/api/v1/pods?watch=true&timeoutSeconds=1"));
    expectAllowed(
      await as("scheduler", "POST", "/api/v1/namespaces/default/pods/p/binding", {
        apiVersion: "v1",
        kind: "Binding",
        metadata: { name: "p" },
        target: { kind: "Node", name: "node01" },
      }),
    );
    expectForbidden(
      await as("scheduler", "DELETE", "/api/v1/namespaces/default/pods/p"),
      'pods "p" is forbidden: User "system:kube-scheduler" cannot delete resource "pods" in API group "" in the namespace "default"',
    );
    expectForbidden(
      await as("scheduler", "GET", "/api/v1/secrets"),
      'secrets is forbidden: User "system:kube-scheduler" cannot list resource "secrets" in API group "" at the cluster scope',
    );
  });

  it("a kubelet registers its node and reads a pod's Secret, but cannot list Secrets or delete namespaces", async () => {
    const node = { apiVersion: "v1", kind: "Node", metadata: { name: "node01" } };
    expect((await as("node01", "POST", "/api/v1/nodes", node)).code).toBe(201);
    const pod = (name: string, nodeName: string, secret: string): unknown => ({
      metadata: { name },
      spec: {
        nodeName,
        containers: [{ name: "c", image: "x", envFrom: [{ configMapRef: { name: `${secret}-cm` } }] }],
        volumes: [{ name: "v", secret: { secretName: secret } }],
      },
    });
    expect((await call(api, "POST", "/api/v1/namespaces/default/pods", pod("on-1", "node01", "s"))).code).toBe(201);
    expect((await call(api, "POST", "/api/v1/namespaces/default/pods", pod("on-2", "node02", "t"))).code).toBe(201);
    expectAllowed(await as("node01", "GET", "/api/v1/namespaces/default/secrets/s"));
    expectAllowed(await as("node01", "GET", "/api/v1/namespaces/default/configmaps/s-cm"));
    expectAllowed(await as("node01", "POST", "/api/v1/namespaces/default/serviceaccounts/default/token", {}));
    // The Node authorizer: only what a pod bound to this node references (kube-apiserver's reason).
    expectForbidden(
      await as("node01", "GET", "/api/v1/namespaces/default/secrets/t"),
      `secrets "t" is forbidden: User "system:node:node01" cannot get resource "secrets" in API group "" in the namespace "default": no relationship found between node 'node01' and this object`,
    );
    expectForbidden(
      await as("node01", "GET", "/api/v1/namespaces/default/configmaps/t-cm"),
      `configmaps "t-cm" is forbidden: User "system:node:node01" cannot get resource "configmaps" in API group "" in the namespace "default": no relationship found between node 'node01' and this object`,
    );
    expectForbidden(
      await as("node01", "GET", "/api/v1/secrets"),
      'secrets is forbidden: User "system:node:node01" cannot list resource "secrets" in API group "" at the cluster scope: can only get individual resources of this type',
    );
    expectForbidden(
      await as("node01", "DELETE", "/api/v1/namespaces/kubevirt"),
      'namespaces "kubevirt" is forbidden: User "system:node:node01" cannot delete resource "namespaces" in API group "" in the namespace "kubevirt"',
    );
  });

  it("a kubelet changes only its own Node and the pods bound to it (NodeRestriction)", async () => {
    expect((await call(api, "POST", "/api/v1/nodes", { metadata: { name: "node02" } })).code).toBe(201);
    expectAllowed(await as("node01", "PATCH", "/api/v1/nodes/node01/status", { status: {} }));
    expectForbidden(
      await as("node01", "PATCH", "/api/v1/nodes/node02/status", { status: {} }),
      'nodes "node02" is forbidden: node "node01" is not allowed to modify node "node02"',
    );
    expectAllowed(await as("node01", "PATCH", "/api/v1/namespaces/default/pods/on-1/status", { status: {} }));
    expectForbidden(
      await as("node01", "PATCH", "/api/v1/namespaces/default/pods/on-2/status", { status: {} }),
      'pods "on-2" is forbidden: node "node01" can only update pod status for pods with spec.nodeName set to itself',
    );
    expectForbidden(
      await as("node01", "DELETE", "/api/v1/namespaces/default/pods/on-2"),
      'pods "on-2" is forbidden: node "node01" can only delete pods with spec.nodeName set to itself',
    );
    expect((await as("node01", "DELETE", "/api/v1/namespaces/default/pods/on-1")).code).toBe(200);
  });

  it("every authenticated identity may read discovery and the version (system:discovery), not other paths", async () => {
    for (const who of ["scheduler", "node01", "kubevirt-handler"]) {
      expect((await as(who, "GET", "/apis")).code).toBe(200);
      expect((await as(who, "GET", "/api/v1")).code).toBe(200);
      expect((await as(who, "GET", "/version")).code).toBe(200);
    }
    expectForbidden(
      await as("node01", "GET", "/metrics"),
      'forbidden: User "system:node:node01" cannot get path "/metrics"',
    );
  });
});

describe("roles and bindings", () => {
  const bob = { "impersonate-user": "bob" };
  const put = (path: string, body: unknown): Promise<Answer> => call(api, "POST", path, body);

  beforeAll(async () => {
    for (const ns of ["team", "other"]) await put("/api/v1/namespaces", { metadata: { name: ns } });
    const rbac = "/apis/rbac.authorization.k8s.io/v1";
    await put(`${rbac}/clusterroles`, {
      metadata: { name: "cm-reader-part", labels: { "example.com/aggregate-to-cm": "true" } },
      rules: [{ apiGroups: [""], resources: ["configmaps"], verbs: ["list", "get"] }],
    });
    await put(`${rbac}/clusterroles`, {
      metadata: { name: "cm-reader" },
      aggregationRule: { clusterRoleSelectors: [{ matchLabels: { "example.com/aggregate-to-cm": "true" } }] },
    });
    await put(`${rbac}/namespaces/team/rolebindings`, {
      metadata: { name: "bob-reads" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "cm-reader" },
      subjects: [{ kind: "User", name: "bob" }],
    });
    await put(`${rbac}/namespaces/other/roles`, {
      metadata: { name: "one-secret" },
      rules: [{ apiGroups: [""], resources: ["secrets"], verbs: ["get"], resourceNames: ["shared"] }],
    });
    await put(`${rbac}/namespaces/other/rolebindings`, {
      metadata: { name: "bob-one-secret" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "one-secret" },
      subjects: [{ kind: "User", name: "bob" }],
    });
    await put(`${rbac}/namespaces/default/rolebindings`, {
      metadata: { name: "dangling" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "nope" },
      subjects: [{ kind: "User", name: "bob" }],
    });
  });

  it("a RoleBinding to an aggregated ClusterRole grants its rules in the binding's namespace only", async () => {
    expect((await as("admin", "GET", "/api/v1/namespaces/team/configmaps", undefined, bob)).code).toBe(200);
    expectForbidden(
      await as("admin", "GET", "/api/v1/namespaces/other/configmaps", undefined, bob),
      'configmaps is forbidden: User "bob" cannot list resource "configmaps" in API group "" in the namespace "other"',
    );
  });

  it("writes an aggregated ClusterRole's rules into it, as the aggregation controller does (kubectl shows them)", async () => {
    const rules = await eventually("cm-reader's aggregated rules", async () => {
      const r = await call(api, "GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/cm-reader");
      return Array.isArray(r.body.rules) && r.body.rules.length > 0 ? r.body.rules : undefined;
    });
    expect(rules).toEqual([{ apiGroups: [""], resources: ["configmaps"], verbs: ["list", "get"] }]);
    // The release's kubevirt.io:view carries aggregate-to-view: the bootstrap view role (and edit, admin) gets it.
    const view = await eventually("view with KubeVirt's rules", async () => {
      const r = await call(api, "GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/view");
      return JSON.stringify(r.body.rules ?? []).includes("kubevirt.io") ? r.body.rules : undefined;
    });
    expect(view).toContainEqual({
      apiGroups: ["kubevirt.io"],
      resources: [
        "virtualmachines",
        "virtualmachineinstances",
        "virtualmachineinstancemigrations",
        "virtualmachineinstancereplicasets",
        "virtualmachineinstancepresets",
      ],
      verbs: ["get", "list", "watch"],
    });
  });

  it("resourceNames limit a rule to the named objects", async () => {
    expect((await as("admin", "GET", "/api/v1/namespaces/other/secrets/shared", undefined, bob)).code).toBe(404);
    expectForbidden(
      await as("admin", "GET", "/api/v1/namespaces/other/secrets/private", undefined, bob),
      'secrets "private" is forbidden: User "bob" cannot get resource "secrets" in API group "" in the namespace "other"',
    );
  });

  it("a binding to a missing role is the denial's reason, as kube-apiserver says it", async () => {
    expectForbidden(
      await as("admin", "GET", "/api/v1/namespaces/default/pods", undefined, bob),
      'pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the namespace "default": RBAC: role.rbac.authorization.k8s.io "nope" not found',
    );
  });
});

/** A WebSocket upgrade request (virtctl console's) with `who`'s token: the status line the server answers. */
function upgrade(who: string, path: string, headers: Record<string, string> = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(new URL(path, api.url), {
      ca: api.caCert,
      headers: {
        authorization: `Bearer ${token[who]}`,
        connection: "Upgrade",
        upgrade: "websocket",
        "sec-websocket-version": "13",
        "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
        ...headers,
      },
    });
    req.on("response", (res) => {
      let body = "";
      res.on("data", (c: Buffer) => (body += c.toString()));
      res.on("end", () => resolve(`${res.statusCode} ${body}`));
    });
    req.on("upgrade", (res, socket) => {
      socket.destroy();
      resolve(`${res.statusCode}`);
    });
    req.on("error", reject);
    req.end();
  });
}

describe("WebSocket upgrades (virtctl console) are authorized like every request", () => {
  const consolePath = "/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachineinstances/v/console";

  it("refuses a console to a user without get on virtualmachineinstances/console", async () => {
    const answer = await upgrade("admin", consolePath, { "impersonate-user": "carol" });
    expect(answer).toMatch(/^403 /);
    expect(JSON.parse(answer.slice(4))).toMatchObject({
      reason: "Forbidden",
      message:
        'virtualmachineinstances.subresources.kubevirt.io "v" is forbidden: User "carol" cannot get resource "virtualmachineinstances/console" in API group "subresources.kubevirt.io" in the namespace "default"',
    });
  });

  it("lets an allowed caller through to the aggregated API (none is registered here: 404)", async () => {
    expect(await upgrade("admin", consolePath)).toMatch(/^404 /);
  });
});

describe("access reviews (kubectl auth can-i)", () => {
  it("answers for a component as its requests are answered", async () => {
    const can = (args: string[]) => k.run(["auth", "can-i", ...args, `--as=${HANDLER}`]);
    const no = await can(["list", "secrets", "--all-namespaces"]);
    expect([no.code, no.stdout.trim()]).toEqual([1, "no"]);
    const yes = await can(["patch", "nodes"]);
    expect([yes.code, yes.stdout.trim()]).toEqual([0, "yes"]);
    const status = await can(["patch", "nodes", "--subresource=status"]);
    expect([status.code, status.stdout.trim()]).toEqual([1, "no"]);
    const admin = await k.run(["auth", "can-i", "delete", "namespaces"]);
    expect(admin.stdout.trim()).toBe("yes");
  });

  it("lists a user's rules in a namespace (kubectl auth can-i --list: SelfSubjectRulesReview)", async () => {
    const r = await k.run(["auth", "can-i", "--list", "--as=system:kube-scheduler"]);
    expect(r.code, r.stderr).toBe(0);
    const rows = r.stdout.split("\n").map((l) => l.trim().split(/\s+/));
    expect(rows[0]).toEqual(["Resources", "Non-Resource", "URLs", "Resource", "Names", "Verbs"]);
    expect(rows).toContainEqual(["pods/binding", "[]", "[]", "[create]"]);
    expect(rows).toContainEqual(["[/version]", "[]", "[get]"]);
    expect(r.stdout).not.toMatch(/^secrets/m);
  });

  it("answers a SubjectAccessReview for its creator when RBAC lets them create one", async () => {
    const review = {
      apiVersion: "authorization.k8s.io/v1",
      kind: "SubjectAccessReview",
      spec: {
        user: "system:kube-scheduler",
        resourceAttributes: { verb: "create", resource: "pods", subresource: "binding", namespace: "x" },
      },
    };
    const r = await call(api, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review);
    expect(r.code).toBe(201);
    expect(r.body.status).toEqual({
      allowed: true,
      reason:
        'RBAC: allowed by ClusterRoleBinding "system:kube-scheduler" of ClusterRole "system:kube-scheduler" to User "system:kube-scheduler"',
    });
    expectForbidden(
      await as("kubevirt-handler", "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review),
      `subjectaccessreviews.authorization.k8s.io is forbidden: User "${HANDLER}" cannot create resource "subjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope`,
    );
  });
});
