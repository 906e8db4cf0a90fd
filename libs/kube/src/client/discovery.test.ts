import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { isNotFound } from "../errors.ts";
import { ResourceDiscovery } from "./discovery.ts";
import { kubeConfigFor } from "./kube-config.ts";
import { RestClient } from "./rest-client.ts";
import { startTestServer, type TestServer } from "./test-server.ts";

const DOCUMENTS: Record<string, unknown> = {
  "/api/v1": {
    kind: "APIResourceList",
    groupVersion: "v1",
    resources: [
      { name: "pods", singularName: "pod", namespaced: true, kind: "Pod", verbs: ["get"] },
      { name: "pods/status", singularName: "", namespaced: true, kind: "Pod", verbs: ["get"] },
      { name: "serviceaccounts", singularName: "serviceaccount", namespaced: true, kind: "ServiceAccount" },
    ],
  },
  "/apis/rbac.authorization.k8s.io/v1": {
    kind: "APIResourceList",
    groupVersion: "rbac.authorization.k8s.io/v1",
    resources: [{ name: "clusterroles", singularName: "clusterrole", namespaced: false, kind: "ClusterRole" }],
  },
};

describe("ResourceDiscovery", () => {
  let server: TestServer;
  beforeEach(async () => {
    server = await startTestServer();
    server.handle = (req, res) => {
      const doc = DOCUMENTS[req.url];
      res.writeHead(doc ? 200 : 404, { "content-type": "application/json" });
      res.end(JSON.stringify(doc ?? { kind: "Status", code: 404, reason: "NotFound", message: "not found" }));
    };
  });
  afterEach(() => server.close());

  it("maps core and group kinds to their plural and scope, skipping subresources", async () => {
    const discovery = new ResourceDiscovery(new RestClient(kubeConfigFor(server.url)));
    expect(await discovery.resourceType("v1", "Pod")).toEqual({
      group: "",
      version: "v1",
      plural: "pods",
      kind: "Pod",
      namespaced: true,
    });
    expect(await discovery.resourceType("rbac.authorization.k8s.io/v1", "ClusterRole")).toEqual({
      group: "rbac.authorization.k8s.io",
      version: "v1",
      plural: "clusterroles",
      kind: "ClusterRole",
      namespaced: false,
    });
  });

  it("asks once per group version", async () => {
    const discovery = new ResourceDiscovery(new RestClient(kubeConfigFor(server.url)));
    await Promise.all([discovery.resourceType("v1", "Pod"), discovery.resourceType("v1", "ServiceAccount")]);
    await discovery.resourceType("v1", "Pod");
    expect(server.requests.map((r) => r.url)).toEqual(["/api/v1"]);
  });

  it("rejects with NotFound for an unknown kind or group version, and asks again after a failure", async () => {
    const discovery = new ResourceDiscovery(new RestClient(kubeConfigFor(server.url)));
    const unknownKind = await discovery.resourceType("v1", "Widget").catch((e: unknown) => e);
    expect(isNotFound(unknownKind)).toBe(true);
    expect((unknownKind as Error).message).toContain('no kind "Widget" in "v1"');
    const unknownGroup = await discovery.resourceType("example.com/v1", "Widget").catch((e: unknown) => e);
    expect(isNotFound(unknownGroup)).toBe(true);
    expect((unknownGroup as Error).message).toContain('does not serve "example.com/v1"');
    await discovery.resourceType("example.com/v1", "Widget").catch(() => undefined);
    expect(server.requests.filter((r) => r.url === "/apis/example.com/v1")).toHaveLength(2);
  });
});
