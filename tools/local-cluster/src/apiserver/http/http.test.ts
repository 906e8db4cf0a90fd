import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "../apiserver.ts";

let api: ApiServerHandle;
beforeAll(async () => {
  api = await startApiServer({ inMemory: true, tls: false });
});
afterAll(async () => {
  await api?.stop();
});

const get = (path: string, headers: Record<string, string> = {}): Promise<Response> =>
  fetch(`${api.url}${path}`, { headers: { Authorization: `Bearer ${api.token}`, ...headers } });

describe("HTTP front", () => {
  it("answers 401 for a wrong token, as kube-apiserver", async () => {
    const wrong = await fetch(`${api.url}/api/v1/pods`, { headers: { Authorization: "Bearer nope" } });
    expect(wrong.status).toBe(401);
    expect(await wrong.json()).toMatchObject({ kind: "Status", reason: "Unauthorized", code: 401 });
    expect((await fetch(`${api.url}/api`, { headers: { Authorization: "Basic Zm9vOmJhcg==" } })).status).toBe(401);
  });

  it("takes a request without credentials as system:anonymous, as kube-apiserver's default --anonymous-auth", async () => {
    // system:public-info-viewer lets system:unauthenticated read the health endpoints and /version ...
    expect((await fetch(`${api.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${api.url}/readyz`)).status).toBe(200);
    const version = await fetch(`${api.url}/version`);
    expect(version.status).toBe(200);
    expect(await version.json()).toMatchObject({ major: "1" });
    // ... and nothing else: RBAC's 403 names the anonymous user, as kube-apiserver's does.
    const pods = await fetch(`${api.url}/api/v1/namespaces/default/pods`);
    expect(pods.status).toBe(403);
    expect(await pods.json()).toMatchObject({
      kind: "Status",
      reason: "Forbidden",
      code: 403,
      message:
        'pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" in the namespace "default"',
    });
    expect((await fetch(`${api.url}/api`)).status).toBe(403); // discovery is system:authenticated's only
  });

  it("serves /version as 1.32, aggregated discovery with its content type, legacy discovery, and both OpenAPI versions", async () => {
    expect(await (await get("/version")).json()).toMatchObject({ major: "1", minor: "32" });
    const agg = await get("/apis", {
      Accept: "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
    });
    expect(agg.headers.get("content-type")).toBe(
      "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
    );
    const body = (await agg.json()) as { items: { metadata: { name: string } }[] };
    expect(body.items.map((i) => i.metadata.name)).toContain("apps");
    const legacy = (await (await get("/api/v1")).json()) as { resources: { name: string }[] };
    expect(legacy.resources.map((r) => r.name)).toEqual(
      expect.arrayContaining(["pods", "pods/status", "pods/binding", "namespaces"]),
    );
    const v2 = await get("/openapi/v2");
    expect(v2.headers.get("content-type")).toBe("application/json");
    const swagger = (await v2.json()) as { swagger: string; definitions: Record<string, unknown> };
    expect(swagger.swagger).toBe("2.0");
    expect(Object.keys(swagger.definitions)).toContain("io.k8s.api.core.v1.Pod");
    const pb = await get("/openapi/v2", { Accept: "application/com.github.proto-openapi.spec.v2@v1.0+protobuf" });
    expect(pb.headers.get("content-type")).toBe("application/com.github.proto-openapi.spec.v2.v1.0+protobuf");
    const etag = pb.headers.get("etag") ?? "";
    expect(etag).toMatch(/^"[0-9A-F]{128}"$/);
    const again = await get("/openapi/v2", {
      Accept: "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
      "If-None-Match": etag,
    });
    expect(again.status).toBe(304);
    const idx = (await (await get("/openapi/v3")).json()) as { paths: Record<string, { serverRelativeURL: string }> };
    expect(idx.paths["api/v1"]?.serverRelativeURL).toMatch(/^\/openapi\/v3\/api\/v1\?hash=[0-9A-F]+$/);
  });

  it("turns bad input into Status errors, never a crash", async () => {
    expect((await get("/api/v1/namespaces/%zz/pods")).status).toBe(400);
    const post = (body: string, type = "application/json"): Promise<Response> =>
      fetch(`${api.url}/api/v1/namespaces/default/configmaps`, {
        method: "POST",
        body,
        headers: { Authorization: `Bearer ${api.token}`, "Content-Type": type },
      });
    expect((await post("{not json")).status).toBe(400);
    expect((await post("[1,2]")).status).toBe(400);
    expect((await post("k8s\0garbage", "application/vnd.kubernetes.protobuf")).status).toBe(400);
    expect((await post(JSON.stringify({ metadata: { name: "UPPER" } }))).status).toBe(422);
    expect((await get("/api/v1/pods?labelSelector=a%20b")).status).toBe(400);
    expect((await get("/api/v1/nosuchthings")).status).toBe(404);
    expect((await get("/version")).status).toBe(200);
  });
});
