/**
 * `matchPolicy` of admission webhooks, as kube-apiserver applies it: with Equivalent (the default) a webhook whose
 * rule lists v1beta1 also sees requests made in v1alpha1 of the same resource, converted to v1beta1 (requestKind
 * names the original); a mutating patch comes back in the request's version. With Exact it does not see them.
 * (VirtualMachinePool is served in v1alpha1 and v1beta1 and KubeVirt's webhook lists v1beta1 only.)
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "../apiserver.ts";
import { call, eventually, type HttpsFixture, jsonBody, startHttps } from "./testdata/fixtures.ts";

type Request = { uid: string; kind: Record<string, string>; requestKind: Record<string, string>; object: unknown };

let api: ApiServerHandle;
let hooks: HttpsFixture;
const seen: Request[] = [];
const MWC = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";
const VWC = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";
const ALPHA = "/apis/example.com/v1alpha1/namespaces/default/gadgets";

const version = (name: string, storage: boolean) => ({
  name,
  served: true,
  storage,
  schema: {
    openAPIV3Schema: {
      type: "object",
      properties: { spec: { type: "object", properties: { size: { type: "integer" } } } },
    },
  },
});

const GADGET_CRD = {
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: "gadgets.example.com" },
  spec: {
    group: "example.com",
    scope: "Namespaced",
    names: { plural: "gadgets", singular: "gadget", kind: "Gadget" },
    versions: [version("v1alpha1", false), version("v1beta1", true)],
  },
};

async function webhook(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const path = new URL(req.url ?? "/", "https://x").pathname;
  const r = ((await jsonBody(req)) as { request: Request }).request;
  seen.push(r);
  const response: Record<string, unknown> = { uid: r.uid, allowed: path !== "/deny" };
  if (path === "/deny") response.status = { code: 422, reason: "Invalid", message: "no gadgets" };
  if (path === "/mutate") {
    response.patchType = "JSONPatch";
    const patch = [{ op: "add", path: "/metadata/labels", value: { seen: "v1beta1" } }];
    response.patch = Buffer.from(JSON.stringify(patch)).toString("base64");
  }
  res.writeHead(200, { "content-type": "application/json" });
  res.end(JSON.stringify({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", response }));
}

function hook(path: string, matchPolicy?: string): Record<string, unknown> {
  return {
    name: `${path.slice(1)}.example.com`,
    clientConfig: { url: `${hooks.url}${path}`, caBundle: hooks.caBundle },
    rules: [{ operations: ["CREATE"], apiGroups: ["example.com"], apiVersions: ["v1beta1"], resources: ["gadgets"] }],
    sideEffects: "None",
    admissionReviewVersions: ["v1"],
    ...(matchPolicy ? { matchPolicy } : {}),
  };
}

const gadget = (name: string) => ({ apiVersion: "example.com/v1alpha1", kind: "Gadget", metadata: { name } });

beforeAll(async () => {
  api = await startApiServer({ inMemory: true });
  hooks = await startHttps((req, res) => void webhook(req, res));
  expect((await call(api, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", GADGET_CRD)).code).toBe(
    201,
  );
  await eventually("the Gadget CRD", async () => ((await call(api, "GET", ALPHA)).code === 200 ? true : undefined));
}, 60_000);

afterEach(async () => {
  seen.length = 0;
  for (const coll of [MWC, VWC]) expect((await call(api, "DELETE", coll)).code).toBe(200);
});

afterAll(async () => {
  await hooks?.close();
  await api?.stop();
});

describe("webhook matchPolicy", () => {
  it("Equivalent (the default): a v1alpha1 request reaches a v1beta1 webhook, converted", async () => {
    expect((await call(api, "POST", VWC, { metadata: { name: "v" }, webhooks: [hook("/deny")] })).code).toBe(201);
    const r = await call(api, "POST", ALPHA, gadget("g1"));
    expect(r.code).toBe(422);
    expect(seen[0]).toMatchObject({
      kind: { group: "example.com", version: "v1beta1", kind: "Gadget" },
      requestKind: { group: "example.com", version: "v1alpha1", kind: "Gadget" },
      object: { apiVersion: "example.com/v1beta1" },
    });
  });

  it("Exact: a v1alpha1 request does not reach a v1beta1 webhook", async () => {
    expect((await call(api, "POST", VWC, { metadata: { name: "v" }, webhooks: [hook("/deny", "Exact")] })).code).toBe(
      201,
    );
    expect((await call(api, "POST", ALPHA, gadget("g2"))).code).toBe(201);
    expect(seen).toEqual([]);
  });

  it("a mutating webhook's patch comes back in the request's version", async () => {
    expect((await call(api, "POST", MWC, { metadata: { name: "m" }, webhooks: [hook("/mutate")] })).code).toBe(201);
    const r = await call(api, "POST", ALPHA, gadget("g3"));
    expect(r.code).toBe(201);
    expect(r.body).toMatchObject({ apiVersion: "example.com/v1alpha1", metadata: { labels: { seen: "v1beta1" } } });
  });
});
