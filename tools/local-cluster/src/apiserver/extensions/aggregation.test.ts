/**
 * API aggregation end to end: a real API server (in memory, random port) given a front-proxy client certificate,
 * a real HTTPS backend that requires that certificate, an APIService created through the API, and the real kubectl
 * reading discovery. Upgrades are checked byte for byte on raw TLS sockets.
 */
import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { connect } from "node:tls";
import { generateCa, issueCertificate } from "@kvt/virt-api/lib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "../apiserver.ts";
import { type Kubectl, kubectl } from "../testdata/kubectl.ts";
import { call, eventually, type HttpsFixture, startHttps } from "./testdata/fixtures.ts";

const GROUP = "things.example.com";
const APISERVICES = "/apis/apiregistration.k8s.io/v1/apiservices";
const frontProxyCa = await generateCa("front-proxy-ca");
const proxyClient = await issueCertificate(frontProxyCa, { commonName: "front-proxy-client", usage: "client" });
let api: ApiServerHandle;
let backend: HttpsFixture;
let k: Kubectl;

function resourceList(version: string): Record<string, unknown> {
  return {
    kind: "APIResourceList",
    apiVersion: "v1",
    groupVersion: `${GROUP}/${version}`,
    resources: [
      { name: "gadgets", singularName: "gadget", namespaced: true, kind: "Gadget", verbs: ["get", "list"] },
      { name: "things/poke", singularName: "", namespaced: true, kind: "", verbs: ["update"] },
    ],
  };
}

function backendHandler(req: IncomingMessage, res: import("node:http").ServerResponse): void {
  const url = new URL(req.url ?? "/", "https://x");
  const cn = (req.socket as import("node:tls").TLSSocket).getPeerCertificate().subject?.CN;
  if (url.pathname === `/apis/${GROUP}/v1`) {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(resourceList("v1")));
    return;
  }
  res.writeHead(200, { "content-type": "application/json" });
  res.end(
    JSON.stringify({
      method: req.method,
      url: req.url,
      cn,
      user: req.headers["x-remote-user"],
      groups: req.headersDistinct["x-remote-group"],
      ...Object.fromEntries(Object.entries(req.headersDistinct).filter(([h]) => h.startsWith("x-remote-extra-"))),
      authorization: req.headers.authorization ?? null,
    }),
  );
}

/** The backend's upgrade: 101, then echoes every byte prefixed with "echo:". */
function backendUpgrade(req: IncomingMessage, socket: Duplex): void {
  socket.write(
    `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Seen-User: ${String(req.headers["x-remote-user"])}\r\n\r\n`,
  );
  socket.on("data", (d: Buffer) => socket.write(`echo:${d.toString()}`));
}

/** Sends a raw upgrade request and collects what comes back until `until` matches or the socket closes. */
function rawUpgrade(path: string, token: string | undefined, send: string, until: RegExp): Promise<string> {
  const url = new URL(api.url);
  return new Promise((resolve, reject) => {
    const s = connect({ host: url.hostname, port: Number(url.port), ca: api.caCert }, () => {
      s.write(
        `GET ${path} HTTP/1.1\r\nHost: ${url.host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
          `${token ? `Authorization: Bearer ${token}\r\n` : ""}Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`,
      );
    });
    let got = "";
    let sent = false;
    s.on("data", (d: Buffer) => {
      got += d.toString();
      if (!sent && got.includes("\r\n\r\n") && got.startsWith("HTTP/1.1 101")) {
        sent = true;
        s.write(send);
      }
      if (until.test(got)) {
        s.destroy();
        resolve(got);
      }
    });
    s.on("close", () => resolve(got));
    s.on("error", reject);
  });
}

beforeAll(async () => {
  api = await startApiServer({
    inMemory: true,
    proxyClient: { certPem: proxyClient.certPem, keyPem: proxyClient.keyPem },
  });
  // The certificate names the Service: kube-aggregator verifies it as things-api.things.svc wherever it is reached.
  backend = await startHttps(backendHandler, frontProxyCa.certPem, ["things-api.things.svc"]);
  backend.server.on("upgrade", backendUpgrade);
  k = kubectl(api.kubeconfigPath);
  const r = await call(api, "POST", APISERVICES, {
    apiVersion: "apiregistration.k8s.io/v1",
    kind: "APIService",
    metadata: { name: `v1.${GROUP}`, annotations: { "kubevirt-ts.io/service-url": backend.url } },
    spec: {
      group: GROUP,
      version: "v1",
      groupPriorityMinimum: 1000,
      versionPriority: 15,
      caBundle: backend.caBundle,
      service: { namespace: "things", name: "things-api", port: 443 },
    },
  });
  expect(r.code).toBe(201);
}, 60_000);

afterAll(async () => {
  k?.cleanup();
  await api?.stop();
  await backend?.close();
});

describe("API aggregation from stored APIServices", () => {
  it("marks the APIService Available once the backend answers discovery", async () => {
    const cond = await eventually("Available=True", async () => {
      const r = await call(api, "GET", `${APISERVICES}/v1.${GROUP}`);
      const c = (r.body.status as { conditions?: { type: string; status: string }[] } | undefined)?.conditions;
      return c?.find((x) => x.type === "Available" && x.status === "True");
    });
    expect(cond).toMatchObject({ reason: "Passed" });
  });

  it("proxies requests over mTLS with the caller as X-Remote-User/X-Remote-Group and no credentials", async () => {
    const r = await call(api, "PUT", `/apis/${GROUP}/v1/namespaces/default/things/t1/poke?x=1`, { a: 1 });
    expect(r.code).toBe(200);
    expect(r.body).toEqual({
      method: "PUT",
      url: `/apis/${GROUP}/v1/namespaces/default/things/t1/poke?x=1`,
      cn: "front-proxy-client",
      user: "kubernetes-admin",
      groups: ["system:masters", "system:authenticated"],
      authorization: null,
    });
    expect((await call(api, "GET", `/apis/${GROUP}/v9/anything`)).code).toBe(404);
  });

  it("forwards the caller's extras as X-Remote-Extra-*: a TokenRequest token's credential-id, impersonated ones", async () => {
    expect(
      (await call(api, "POST", "/api/v1/namespaces/default/serviceaccounts", { metadata: { name: "bot" } })).code,
    ).toBe(201);
    const rbac = "/apis/rbac.authorization.k8s.io/v1";
    await call(api, "POST", `${rbac}/clusterroles`, {
      metadata: { name: "poker" },
      rules: [{ apiGroups: [GROUP], resources: ["things/poke"], verbs: ["update"] }],
    });
    await call(api, "POST", `${rbac}/clusterrolebindings`, {
      metadata: { name: "bot-pokes" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "poker" },
      subjects: [{ kind: "ServiceAccount", name: "bot", namespace: "default" }],
    });
    const tr = await call(api, "POST", "/api/v1/namespaces/default/serviceaccounts/bot/token", { spec: {} });
    const token = (tr.body.status as { token: string }).token;
    const poke = `/apis/${GROUP}/v1/namespaces/default/things/t1/poke`;
    const asBot = await call(api, "PUT", poke, {}, "application/json", { authorization: `Bearer ${token}` });
    expect(asBot.body).toMatchObject({
      user: "system:serviceaccount:default:bot",
      "x-remote-extra-authentication.kubernetes.io%2fcredential-id": [expect.stringMatching(/^JTI=[0-9a-f-]{36}$/)],
    });
    const asAlice = await call(api, "PUT", poke, {}, "application/json", {
      "impersonate-user": "alice",
      "impersonate-extra-scopes": ["view", "edit"],
    });
    expect(asAlice.code).toBe(403); // alice may not poke; the admin as alice is alice
    const asBotAgain = await call(api, "PUT", poke, {}, "application/json", {
      "impersonate-user": "system:serviceaccount:default:bot",
      "impersonate-extra-scopes": ["view", "edit"],
    });
    expect(asBotAgain.body).toMatchObject({
      user: "system:serviceaccount:default:bot",
      "x-remote-extra-scopes": ["view", "edit"],
    });
  });

  it("lists the group in discovery, legacy and aggregated, so kubectl api-resources shows it", async () => {
    const groups = (await call(api, "GET", "/apis")).body.groups as { name: string }[];
    expect(groups.map((g) => g.name)).toContain(GROUP);
    expect((await call(api, "GET", `/apis/${GROUP}`)).body).toMatchObject({
      kind: "APIGroup",
      name: GROUP,
      preferredVersion: { groupVersion: `${GROUP}/v1`, version: "v1" },
    });
    expect((await call(api, "GET", `/apis/${GROUP}/v1`)).body).toEqual(resourceList("v1"));
    const out = await k.run(["api-resources", `--api-group=${GROUP}`]);
    expect(out.stderr).toBe("");
    expect(out.stdout).toMatch(/^gadgets\s+things\.example\.com\/v1\s+true\s+Gadget$/m);
    // `things/poke` has no parent: its verb-less stand-in is skipped by kubectl, as for subresources.kubevirt.io.
    expect(out.stdout).not.toMatch(/^things\s/m);
    expect((await k.run(["api-versions"])).stdout).toMatch(new RegExp(`^${GROUP}/v1$`, "m"));
  });

  it("relays WebSocket upgrades byte for byte after the backend's 101, and refuses others", async () => {
    const path = `/apis/${GROUP}/v1/namespaces/default/things/t1/console`;
    const echoed = await rawUpgrade(path, api.token, "hello", /echo:hello/);
    expect(echoed).toMatch(/^HTTP\/1\.1 101/);
    expect(echoed).toContain("X-Seen-User: kubernetes-admin");
    expect(echoed).toContain("echo:hello");
    expect(await rawUpgrade(path, "not-a-token", "", /\}$/)).toMatch(/^HTTP\/1\.1 401[\s\S]*"reason":"Unauthorized"/);
    // No credentials: system:anonymous, whom RBAC refuses (kube-apiserver's default --anonymous-auth).
    expect(await rawUpgrade(path, undefined, "", /\}$/)).toMatch(
      /^HTTP\/1\.1 403[\s\S]*User \\"system:anonymous\\" cannot get resource[\s\S]*"reason":"Forbidden"/,
    );
    expect(await rawUpgrade("/api/v1/namespaces/default/pods/p/exec", api.token, "", /\}$/)).toMatch(
      /^HTTP\/1\.1 404[\s\S]*"reason":"NotFound"/,
    );
  });

  it("answers 503 when the backend is gone, and follows APIService deletion", async () => {
    await backend.close();
    const r = await call(api, "GET", `/apis/${GROUP}/v1/namespaces/default/things/t1`);
    expect(r.code).toBe(503);
    expect(r.body.reason).toBe("ServiceUnavailable");
    expect((await call(api, "DELETE", `${APISERVICES}/v1.${GROUP}`)).code).toBe(200);
    const groups = (await call(api, "GET", "/apis")).body.groups as { name: string }[];
    expect(groups.map((g) => g.name)).not.toContain(GROUP);
    expect((await call(api, "GET", `/apis/${GROUP}/v1/namespaces/default/things/t1`)).code).toBe(404);
  });
});
