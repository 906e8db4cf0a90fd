/**
 * Admission webhooks end to end: a real API server (in memory, random port), a real HTTPS webhook server with its
 * own CA, configurations created through the API, and the real kubectl reading the denials.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { generateCa, issueCertificate } from "@kvt/certs";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { type ApiServerHandle, startApiServer } from "../apiserver.ts";
import { WIDGET_CRD } from "../testdata/crd-fixture.ts";
import { type Kubectl, kubectl } from "../testdata/kubectl.ts";
import { call, eventually, type HttpsFixture, jsonBody, startHttps } from "./testdata/fixtures.ts";

type Review = { request: Record<string, unknown> & { uid: string; object: { metadata: Record<string, unknown> } } };

let api: ApiServerHandle;
let hooks: HttpsFixture;
let k: Kubectl;
const seen: { path: string; request: Review["request"] }[] = [];
const WIDGETS = "/apis/example.com/v1/namespaces/default/widgets";
const MWC = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";
const VWC = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";

function answer(res: ServerResponse, uid: string, response: Record<string, unknown>): void {
  res.writeHead(200, { "content-type": "application/json" });
  res.end(
    JSON.stringify({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", response: { uid, ...response } }),
  );
}

async function webhook(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const path = new URL(req.url ?? "/", "https://x").pathname;
  if (path === "/slow") return; // never answers: the API server's deadline must fire
  const review = (await jsonBody(req)) as unknown as Review;
  const r = review.request;
  seen.push({ path, request: r });
  const spec = (r.object as { spec?: { size?: number } } | null)?.spec;
  if (path === "/mutate") {
    const patch = [{ op: "add", path: "/metadata/labels", value: { mutated: "yes" } }];
    return answer(res, r.uid, {
      allowed: true,
      patchType: "JSONPatch",
      patch: Buffer.from(JSON.stringify(patch)).toString("base64"),
    });
  }
  if (path === "/deny" && spec?.size === 13)
    return answer(res, r.uid, {
      allowed: false,
      status: {
        code: 422,
        reason: "Invalid",
        message: "spec.size: Invalid value: 13: unlucky",
        details: {
          causes: [{ reason: "FieldValueInvalid", message: "Invalid value: 13: unlucky", field: "spec.size" }],
        },
      },
    });
  if (path === "/deny-plain")
    return answer(res, r.uid, { allowed: false, status: { code: 200, message: "no widgets today" } });
  if (path === "/bad-uid") return answer(res, "not-the-uid", { allowed: true });
  answer(res, r.uid, { allowed: true });
}

function hook(name: string, path: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    name,
    clientConfig: { url: `${hooks.url}${path}`, caBundle: hooks.caBundle },
    rules: [
      { operations: ["CREATE", "UPDATE"], apiGroups: ["example.com"], apiVersions: ["v1"], resources: ["widgets"] },
    ],
    sideEffects: "None",
    admissionReviewVersions: ["v1"],
    ...extra,
  };
}

async function configure(coll: string, name: string, webhooks: Record<string, unknown>[]): Promise<void> {
  const r = await call(api, "POST", coll, { metadata: { name }, webhooks });
  expect(r.code).toBe(201);
}

const widget = (name: string, size: number, labels?: Record<string, string>) => ({
  apiVersion: "example.com/v1",
  kind: "Widget",
  metadata: { name, ...(labels ? { labels } : {}) },
  spec: { size },
});

beforeAll(async () => {
  api = await startApiServer({ inMemory: true });
  hooks = await startHttps((req, res) => void webhook(req, res));
  k = kubectl(api.kubeconfigPath);
  expect(
    (await call(api, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", parse(WIDGET_CRD))).code,
  ).toBe(201);
  await eventually("the Widget CRD", async () => ((await call(api, "GET", WIDGETS)).code === 200 ? true : undefined));
}, 60_000);

afterEach(async () => {
  for (const coll of [MWC, VWC]) expect((await call(api, "DELETE", coll)).code).toBe(200);
});

afterAll(async () => {
  k?.cleanup();
  await hooks?.close();
  await api?.stop();
});

describe("admission webhooks from stored configurations", () => {
  it("applies a mutating webhook's JSONPatch and sends AdmissionReview v1 with the request's facts", async () => {
    await configure(MWC, "m1", [
      hook("mutate.example.com", "/mutate", { objectSelector: { matchLabels: { mutate: "me" } } }),
    ]);
    const r = await call(api, "POST", `${WIDGETS}?dryRun=All`, widget("wm", 1, { mutate: "me" }));
    expect(r.code).toBe(201);
    expect((r.body.metadata as { labels: Record<string, string> }).labels).toEqual({ mutated: "yes" });
    const req = seen.find((s) => s.path === "/mutate")?.request;
    expect(req).toMatchObject({
      kind: { group: "example.com", version: "v1", kind: "Widget" },
      resource: { group: "example.com", version: "v1", resource: "widgets" },
      name: "wm",
      namespace: "default",
      operation: "CREATE",
      dryRun: true,
      userInfo: { username: "kubernetes-admin" },
      options: { kind: "CreateOptions", apiVersion: "meta.k8s.io/v1" },
    });
    expect((await call(api, "GET", `${WIDGETS}/wm`)).code).toBe(404);
    // objectSelector: an unlabelled widget is not sent to the webhook.
    const before = seen.length;
    const plain = await call(api, "POST", WIDGETS, widget("wplain", 1));
    expect(plain.code).toBe(201);
    expect((plain.body.metadata as { labels?: unknown }).labels).toBeUndefined();
    expect(seen.length).toBe(before);
    expect((await call(api, "DELETE", `${MWC}/m1`)).code).toBe(200);
  });

  it("refuses with kube-apiserver's denial message, keeping code, reason and causes; nothing is stored", async () => {
    await configure(VWC, "v1", [hook("deny.example.com", "/deny")]);
    const r = await call(api, "POST", WIDGETS, widget("w13", 13));
    expect(r.code).toBe(422);
    expect(r.body).toMatchObject({
      kind: "Status",
      reason: "Invalid",
      message: 'admission webhook "deny.example.com" denied the request: spec.size: Invalid value: 13: unlucky',
      details: { causes: [{ reason: "FieldValueInvalid", field: "spec.size", message: "Invalid value: 13: unlucky" }] },
    });
    expect((await call(api, "GET", `${WIDGETS}/w13`)).code).toBe(404);
    const out = await k.run(["create", "-f", k.file("w13.yaml", JSON.stringify(widget("w13", 13)))]);
    expect(out.code).not.toBe(0);
    expect(out.stderr).toContain("spec.size: Invalid value: 13: unlucky");
    expect((await call(api, "POST", WIDGETS, widget("w12", 12))).code).toBe(201);
    expect((await call(api, "DELETE", `${VWC}/v1`)).code).toBe(200);
    // Re-read on change: the deleted configuration is no longer called.
    expect((await call(api, "POST", WIDGETS, widget("w13", 13))).code).toBe(201);
  });

  it("raises a denial code below 400 to 400, as kubectl shows it", async () => {
    await configure(VWC, "v2", [hook("plain.example.com", "/deny-plain")]);
    const out = await k.run(["create", "-f", k.file("wp.yaml", JSON.stringify(widget("wp", 1)))]);
    // No reason in the webhook's status: kubectl prints no reason either (as against kube-apiserver).
    expect(out.stderr).toContain('Error from server: error when creating "');
    expect(out.stderr).toContain('admission webhook "plain.example.com" denied the request: no widgets today');
    const raw = await call(api, "POST", WIDGETS, widget("wp", 1));
    expect(raw.code).toBe(400);
  });

  it.each([
    ["an unreachable URL", { clientConfig: { url: "https://127.0.0.1:1/x" } }, "connect ECONNREFUSED"],
    ["a certificate the caBundle did not sign", {}, "unable to verify the first certificate"],
    ["a wrong response uid", {}, 'expected response.uid="'],
    ["a deadline (timeoutSeconds)", { timeoutSeconds: 1 }, "context deadline exceeded"],
  ])("failurePolicy Fail turns %s into a 500; Ignore lets the write through", async (_what, extra, why) => {
    const path = _what === "a wrong response uid" ? "/bad-uid" : _what.startsWith("a deadline") ? "/slow" : "/ok";
    const base = hook("fail.example.com", path, extra);
    if (_what.startsWith("a certificate"))
      base.clientConfig = {
        url: `${hooks.url}/ok`,
        caBundle: Buffer.from((await generateCa("other")).certPem).toString("base64"),
      };
    await configure(VWC, "vf", [{ ...base, failurePolicy: "Fail" }]);
    const r = await call(api, "POST", WIDGETS, widget("wf", 1));
    expect(r.code).toBe(500);
    expect(r.body.reason).toBe("InternalError");
    expect(r.body.message).toContain('failed calling webhook "fail.example.com": ');
    expect(r.body.message).toContain(why);
    expect((await call(api, "DELETE", `${VWC}/vf`)).code).toBe(200);
    await configure(VWC, "vi", [{ ...base, failurePolicy: "Ignore" }]);
    expect((await call(api, "POST", WIDGETS, widget("wf", 1))).code).toBe(201);
    expect((await call(api, "DELETE", `${WIDGETS}/wf`)).code).toBe(200);
    expect((await call(api, "DELETE", `${VWC}/vi`)).code).toBe(200);
  });

  it("matches */status rules on status writes only, and namespaceSelector by the namespace's labels", async () => {
    const statusRule = [
      { operations: ["UPDATE"], apiGroups: ["*"], apiVersions: ["*"], resources: ["*/status"], scope: "Namespaced" },
    ];
    await configure(VWC, "vs", [
      { ...hook("status.example.com", "/ok"), rules: statusRule },
      hook("ns.example.com", "/ok", { namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "other" } } }),
    ]);
    const created = await call(api, "POST", WIDGETS, widget("ws", 1));
    expect(created.code).toBe(201);
    const before = seen.length;
    const patched = await call(
      api,
      "PATCH",
      `${WIDGETS}/ws/status`,
      { status: { phase: "Ready" } },
      "application/merge-patch+json",
    );
    expect(patched.code).toBe(200);
    const calls = seen.slice(before);
    expect(calls.map((c) => c.request.subResource)).toEqual(["status"]);
    expect(
      (await call(api, "PATCH", `${WIDGETS}/ws`, { spec: { size: 2 } }, "application/merge-patch+json")).code,
    ).toBe(200);
    expect(seen.length).toBe(before + 1);
    expect((await call(api, "DELETE", `${VWC}/vs`)).code).toBe(200);
  });

  it("verifies a Service-referenced webhook's certificate by <service>.<namespace>.svc, also behind a service URL", async () => {
    const ca = await generateCa("svc-ca");
    const serving = await issueCertificate(ca, { dnsNames: ["webhooks.default.svc"] });
    const server = createServer({ cert: serving.certPem, key: serving.keyPem }, (req, res) => void webhook(req, res));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    const base = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const configureService = async (name: string, service: string): Promise<void> => {
      const clientConfig = {
        service: { namespace: "default", name: service, path: "/deny-plain", port: 443 },
        caBundle: Buffer.from(ca.certPem).toString("base64"),
      };
      const body = {
        metadata: { name, annotations: { "kubevirt-ts.io/service-url": base } },
        webhooks: [{ ...hook(`${name}.example.com`, "/deny-plain"), clientConfig }],
      };
      expect((await call(api, "POST", VWC, body)).code).toBe(201);
    };
    try {
      await configureService("svc", "webhooks");
      const denied = await call(api, "POST", WIDGETS, widget("ws1", 1));
      expect(denied.body.message).toBe('admission webhook "svc.example.com" denied the request: no widgets today');
      expect((await call(api, "DELETE", `${VWC}/svc`)).code).toBe(200);
      // The same server behind another Service's name: its certificate does not name it, so the call fails.
      await configureService("other", "elsewhere");
      const failed = await call(api, "POST", WIDGETS, widget("ws2", 1));
      expect(failed.code).toBe(500);
      expect(String(failed.body.message)).toMatch(
        /failed calling webhook "other.example.com".*elsewhere\.default\.svc/,
      );
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it("refuses a dry run for a webhook with side effects", async () => {
    await configure(VWC, "vd", [hook("effects.example.com", "/ok", { sideEffects: "Some" })]);
    const r = await call(api, "POST", `${WIDGETS}?dryRun=All`, widget("wd", 1));
    expect(r.code).toBe(400);
    expect(r.body.message).toBe('admission webhook "effects.example.com" does not support dry run');
    expect((await call(api, "DELETE", `${VWC}/vd`)).code).toBe(200);
  });
});
