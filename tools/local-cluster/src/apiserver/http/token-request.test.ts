import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "../apiserver.ts";
import { call } from "../extensions/testdata/fixtures.ts";

let api: ApiServerHandle;
beforeAll(async () => {
  api = await startApiServer({ inMemory: true });
  const sa = { metadata: { name: "robot" } };
  expect((await call(api, "POST", "/api/v1/namespaces/default/serviceaccounts", sa)).code).toBe(201);
});
afterAll(async () => {
  await api.stop();
});

const TOKEN = "/api/v1/namespaces/default/serviceaccounts/robot/token";

describe("serviceaccounts/token (TokenRequest)", () => {
  it("gives a token that authenticates as the service account", async () => {
    const r = await call(api, "POST", TOKEN, { spec: { expirationSeconds: 3607 } });
    expect(r.code).toBe(201);
    expect(r.body).toMatchObject({
      kind: "TokenRequest",
      apiVersion: "authentication.k8s.io/v1",
      spec: { expirationSeconds: 3607 },
      status: { token: expect.any(String), expirationTimestamp: expect.any(String) },
    });
    const token = (r.body as { status: { token: string } }).status.token;
    // Impersonation is refused to a service account, with its user name in the message: who the token is.
    const who = await call(api, "GET", "/api/v1/namespaces", undefined, "application/json", {
      authorization: `Bearer ${token}`,
      "impersonate-user": "someone",
    });
    expect(who.code).toBe(403);
    expect((who.body as { message: string }).message).toContain('User "system:serviceaccount:default:robot"');
    const unknown = await call(api, "GET", "/api/v1/namespaces", undefined, "application/json", {
      authorization: "Bearer not-a-token",
    });
    expect(unknown.code).toBe(401);
  });

  it("refuses a missing account and a lifetime under 10 minutes as kube-apiserver", async () => {
    const missing = await call(api, "POST", "/api/v1/namespaces/default/serviceaccounts/ghost/token", {});
    expect(missing.code).toBe(404);
    const short = await call(api, "POST", TOKEN, { spec: { expirationSeconds: 60 } });
    expect(short.code).toBe(422);
    expect((short.body as { message: string }).message).toContain("may not specify a duration less than 10 minutes");
  });

  it("is listed in discovery as TokenRequest of authentication.k8s.io", async () => {
    const r = await call(api, "GET", "/api/v1");
    const resources = (r.body as { resources: { name: string; kind: string; group?: string; verbs: string[] }[] })
      .resources;
    expect(resources.find((x) => x.name === "serviceaccounts/token")).toEqual(
      expect.objectContaining({ kind: "TokenRequest", group: "authentication.k8s.io", verbs: ["create"] }),
    );
  });
});
