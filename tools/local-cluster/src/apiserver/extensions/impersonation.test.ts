/**
 * Impersonation through a real API server: the user the Impersonate-* headers name is who admission webhooks see
 * (virt-api acting as the caller relies on it); kubectl's --as/--as-group send them.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "../apiserver.ts";
import { type Kubectl, kubectl } from "../testdata/kubectl.ts";
import { call, type HttpsFixture, jsonBody, startHttps } from "./testdata/fixtures.ts";

let api: ApiServerHandle;
let hooks: HttpsFixture;
let k: Kubectl;
const users: unknown[] = [];

beforeAll(async () => {
  api = await startApiServer({ inMemory: true });
  hooks = await startHttps((req, res) => {
    void jsonBody(req).then((review) => {
      const r = review.request as { uid: string; userInfo: unknown };
      users.push(r.userInfo);
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          apiVersion: "admission.k8s.io/v1",
          kind: "AdmissionReview",
          response: { uid: r.uid, allowed: true },
        }),
      );
    });
  });
  k = kubectl(api.kubeconfigPath);
  const rule = { operations: ["CREATE"], apiGroups: [""], apiVersions: ["v1"], resources: ["configmaps"] };
  const r = await call(api, "POST", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", {
    metadata: { name: "who" },
    webhooks: [
      {
        name: "who.example.com",
        clientConfig: { url: `${hooks.url}/who`, caBundle: hooks.caBundle },
        rules: [rule],
        sideEffects: "None",
        admissionReviewVersions: ["v1"],
      },
    ],
  });
  expect(r.code).toBe(201);
}, 60_000);

afterAll(async () => {
  k?.cleanup();
  await hooks?.close();
  await api?.stop();
});

describe("impersonation", () => {
  it("acts as the impersonated user (kubectl --as/--as-group), system:authenticated added", async () => {
    // RBAC: the impersonated user acts with its own permissions, so the group devs may create configmaps.
    const rbac = "/apis/rbac.authorization.k8s.io/v1";
    const grant = { apiGroups: [""], resources: ["configmaps"], verbs: ["create"] };
    await call(api, "POST", `${rbac}/clusterroles`, { metadata: { name: "cm-creator" }, rules: [grant] });
    await call(api, "POST", `${rbac}/clusterrolebindings`, {
      metadata: { name: "devs-create-cm" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "cm-creator" },
      subjects: [{ kind: "Group", name: "devs" }],
    });
    const out = await k.run(["create", "configmap", "c1", "--as=alice", "--as-group=devs"]);
    expect(out.stdout.trim()).toBe("configmap/c1 created");
    expect(users.at(-1)).toEqual({ username: "alice", groups: ["devs", "system:authenticated"] });
    await call(api, "POST", "/api/v1/namespaces/default/configmaps", { metadata: { name: "c2" } });
    expect(users.at(-1)).toEqual({ username: "kubernetes-admin", groups: ["system:masters", "system:authenticated"] });
  });

  it("acts with the impersonated user's permissions, not the impersonator's (kube-apiserver's 403)", async () => {
    const out = await k.run(["create", "configmap", "c3", "--as=bob"]);
    expect(out.stderr.trim()).toBe(
      'error: failed to create configmap: configmaps is forbidden: User "bob" cannot create resource "configmaps" in API group "" in the namespace "default"',
    );
  });

  it("refuses groups without a user", async () => {
    const r = await call(api, "GET", "/api/v1/namespaces", undefined, "application/json", { "impersonate-group": "x" });
    expect(r.code).toBe(500);
    expect(r.body.message).toContain("without impersonating a user");
  });
});
