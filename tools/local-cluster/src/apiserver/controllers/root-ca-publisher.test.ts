import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "../apiserver.ts";
import { call, eventually } from "../extensions/testdata/fixtures.ts";

let api: ApiServerHandle;
beforeAll(async () => {
  api = await startApiServer({ inMemory: true });
});
afterAll(async () => {
  await api.stop();
});

const rootCa = (ns: string): string => `/api/v1/namespaces/${ns}/configmaps/kube-root-ca.crt`;

/** The ConfigMap's ca.crt once it is the server's CA. */
const published = (ns: string): Promise<string> =>
  eventually(`kube-root-ca.crt in ${ns}`, async () => {
    const r = await call(api, "GET", rootCa(ns));
    const ca = (r.body as { data?: Record<string, string> }).data?.["ca.crt"];
    return ca === api.caCert ? ca : undefined;
  });

describe("root CA publisher", () => {
  it("publishes kube-root-ca.crt with the server's CA in the boot namespaces and in each new one", async () => {
    expect(api.caCert).toContain("BEGIN CERTIFICATE");
    await published("default");
    await published("kube-system");
    expect((await call(api, "POST", "/api/v1/namespaces", { metadata: { name: "team-a" } })).code).toBe(201);
    await published("team-a");
  });

  it("puts the ConfigMap back when it is deleted or its data edited", async () => {
    await published("default");
    expect((await call(api, "DELETE", rootCa("default"))).code).toBe(200);
    await published("default");
    const edited = { metadata: { name: "kube-root-ca.crt" }, data: { "ca.crt": "not the CA" } };
    expect((await call(api, "PUT", rootCa("default"), edited)).code).toBe(200);
    await published("default");
  });
});
