/**
 * Admission webhooks on pods/eviction, as kube-apiserver calls them: a CREATE of resource pods, subResource eviction,
 * kind policy/v1 Eviction with the Eviction as the object; matchConditions on the Eviction's name pick which
 * webhook is called (KubeVirt's `object.metadata.name.startsWith("virt-launcher")`); a 429 denial keeps its code, so
 * `kubectl drain` retries; the pod is then deleted without a DELETE admission round.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "../apiserver.ts";
import { call, type HttpsFixture, jsonBody, startHttps } from "./testdata/fixtures.ts";

type Request = Record<string, unknown> & { uid: string; operation: string };

let api: ApiServerHandle;
let hooks: HttpsFixture;
const seen: { path: string; request: Request }[] = [];
const VWC = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";
const PODS = "/api/v1/namespaces/default/pods";

async function webhook(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const path = new URL(req.url ?? "/", "https://x").pathname;
  const request = ((await jsonBody(req)) as { request: Request }).request;
  seen.push({ path, request });
  const deny = path === "/evict" && request.operation === "CREATE";
  const response = {
    uid: request.uid,
    allowed: !deny,
    ...(deny ? { status: { code: 429, message: 'Eviction triggered evacuation of VMI "default/v"' } } : {}),
  };
  res.writeHead(200, { "content-type": "application/json" });
  res.end(JSON.stringify({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", response }));
}

const hook = (name: string, path: string, resources: string[], operations: string[], prefix?: string) => ({
  name,
  clientConfig: { url: `${hooks.url}${path}`, caBundle: hooks.caBundle },
  rules: [{ operations, apiGroups: [""], apiVersions: ["v1"], resources }],
  sideEffects: "NoneOnDryRun",
  admissionReviewVersions: ["v1"],
  ...(prefix ? { matchConditions: [{ name: "n", expression: `object.metadata.name.startsWith("${prefix}")` }] } : {}),
});

const pod = (name: string) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name },
  spec: { containers: [{ name: "c", image: "busybox" }] },
});

const evict = (name: string, extra: Record<string, unknown> = {}) =>
  call(api, "POST", `${PODS}/${name}/eviction`, {
    apiVersion: "policy/v1",
    kind: "Eviction",
    metadata: { name },
    ...extra,
  });

beforeAll(async () => {
  api = await startApiServer({ inMemory: true });
  hooks = await startHttps((req, res) => void webhook(req, res));
  const configuration = {
    metadata: { name: "evictions" },
    webhooks: [
      hook("launchers.example.com", "/evict", ["pods/eviction"], ["*"], "virt-launcher"),
      hook("hotplug.example.com", "/hotplug", ["pods/eviction"], ["*"], "hp-volume-"),
      hook("deletes.example.com", "/delete", ["pods"], ["DELETE"]),
    ],
  };
  expect((await call(api, "POST", VWC, configuration)).code).toBe(201);
  for (const name of ["virt-launcher-v-abcde", "web"])
    expect((await call(api, "POST", PODS, pod(name))).code).toBe(201);
}, 60_000);

afterAll(async () => {
  await hooks?.close();
  await api?.stop();
});

describe("admission of pods/eviction", () => {
  it("calls the matching webhook with CREATE pods/eviction and a policy/v1 Eviction; its 429 is the answer", async () => {
    seen.length = 0;
    const r = await evict("virt-launcher-v-abcde");
    expect(r.code).toBe(429);
    expect(r.body).toMatchObject({
      message:
        'admission webhook "launchers.example.com" denied the request: Eviction triggered evacuation of VMI "default/v"',
    });
    expect(seen.map((s) => s.path)).toEqual(["/evict"]);
    expect(seen[0]?.request).toMatchObject({
      operation: "CREATE",
      kind: { group: "policy", version: "v1", kind: "Eviction" },
      resource: { group: "", version: "v1", resource: "pods" },
      subResource: "eviction",
      name: "virt-launcher-v-abcde",
      namespace: "default",
      object: { kind: "Eviction", metadata: { name: "virt-launcher-v-abcde" } },
    });
    expect((await call(api, "GET", `${PODS}/virt-launcher-v-abcde`)).code).toBe(200);
  });

  it("skips webhooks whose matchConditions rule the pod out, and deletes without DELETE admission", async () => {
    seen.length = 0;
    const r = await evict("web", { deleteOptions: { gracePeriodSeconds: 0 } });
    expect(r.code).toBe(201);
    expect(r.body).toMatchObject({ kind: "Status", status: "Success", code: 201 });
    expect(seen).toEqual([]);
    expect((await call(api, "GET", `${PODS}/web`)).code).toBe(404);
  });

  it("refuses DeleteOptions a DELETE would refuse", async () => {
    expect((await call(api, "POST", PODS, pod("other"))).code).toBe(201);
    const r = await evict("other", { deleteOptions: { propagationPolicy: "Sideways" } });
    expect(r.code).toBe(422);
    expect((await call(api, "GET", `${PODS}/other`)).code).toBe(200);
  });

  it("marks the pod DisruptionTarget (EvictionByEvictionAPI) and deletes it with its grace period", async () => {
    const bound = { ...pod("bound"), spec: { nodeName: "n1", containers: [{ name: "c", image: "busybox" }] } };
    expect((await call(api, "POST", PODS, bound)).code).toBe(201);
    expect((await evict("bound")).code).toBe(201);
    const r = await call(api, "GET", `${PODS}/bound`);
    const got = r.body as { metadata: Record<string, unknown>; status: { conditions: unknown[] } };
    expect(got.metadata.deletionGracePeriodSeconds).toBe(30);
    expect(got.status.conditions).toContainEqual(
      expect.objectContaining({
        type: "DisruptionTarget",
        status: "True",
        reason: "EvictionByEvictionAPI",
        message: "Eviction API: evicting",
      }),
    );
  });

  it("leaves the pod untouched when the Eviction's preconditions do not hold", async () => {
    expect((await call(api, "POST", PODS, pod("kept"))).code).toBe(201);
    const r = await evict("kept", { deleteOptions: { preconditions: { uid: "not-its-uid" } } });
    expect(r.code).toBe(409);
    const got = (await call(api, "GET", `${PODS}/kept`)).body as { status?: { conditions?: unknown[] } };
    expect(got.status?.conditions ?? []).not.toContainEqual(expect.objectContaining({ type: "DisruptionTarget" }));
  });

  it("refuses an Eviction naming another pod", async () => {
    const r = await call(api, "POST", `${PODS}/web/eviction`, {
      apiVersion: "policy/v1",
      kind: "Eviction",
      metadata: { name: "x" },
    });
    expect(r.code).toBe(400);
  });
});
