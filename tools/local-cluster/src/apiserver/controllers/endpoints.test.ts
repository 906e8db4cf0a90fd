/**
 * The Endpoints controller: the subsets as a table (ready, not ready, terminating, publishNotReadyAddresses, port
 * groups), and against a real in-memory API server (the object follows the pods, keeps a user's selectorless
 * Endpoints, and goes with its Service).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "../apiserver.ts";
import { call, eventually } from "../extensions/testdata/fixtures.ts";
import type { KubeObject } from "../types.ts";
import { desiredSubsets, endpointsLabels, LABEL_SKIP_MIRROR } from "./endpoints.ts";

const service = (spec: Record<string, unknown> = {}): KubeObject => ({
  metadata: { name: "web", namespace: "ns", labels: { team: "a" } },
  spec: { selector: { app: "web" }, ports: [{ port: 80, targetPort: "http", protocol: "TCP" }], ...spec },
});
const pod = (name: string, ip: string, o: { ready?: boolean; deleting?: boolean; port?: number } = {}): KubeObject => ({
  metadata: {
    name,
    namespace: "ns",
    uid: `uid-${name}`,
    labels: { app: "web" },
    ...(o.deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}),
  },
  spec: { nodeName: "node01", containers: [{ name: "c", ports: [{ name: "http", containerPort: o.port ?? 8080 }] }] },
  status: {
    phase: "Running",
    podIP: ip,
    conditions: [{ type: "Ready", status: o.ready === false ? "False" : "True" }],
  },
});
const ref = (name: string) => ({ kind: "Pod", namespace: "ns", name, uid: `uid-${name}` });

describe("desiredSubsets", () => {
  it("puts ready pods in addresses and unready ones in notReadyAddresses, by IP, and leaves out terminating ones", () => {
    expect(
      desiredSubsets(service(), [
        pod("b", "10.1.1.10"),
        pod("a", "10.1.1.9"),
        pod("c", "10.1.1.11", { ready: false }),
        pod("d", "10.1.1.12", { deleting: true }),
      ]),
    ).toEqual([
      {
        addresses: [
          { ip: "10.1.1.9", nodeName: "node01", targetRef: ref("a") },
          { ip: "10.1.1.10", nodeName: "node01", targetRef: ref("b") },
        ],
        notReadyAddresses: [{ ip: "10.1.1.11", nodeName: "node01", targetRef: ref("c") }],
        ports: [{ port: 8080, protocol: "TCP" }],
      },
    ]);
  });

  it("publishes every pod as ready with publishNotReadyAddresses, terminating ones included", () => {
    const subsets = desiredSubsets(service({ publishNotReadyAddresses: true }), [
      pod("c", "10.1.1.11", { ready: false }),
      pod("d", "10.1.1.12", { deleting: true }),
    ]);
    expect(subsets?.[0]?.addresses?.map((a) => a.ip)).toEqual(["10.1.1.11", "10.1.1.12"]);
    expect(subsets?.[0]?.notReadyAddresses).toBeUndefined();
  });

  it("groups pods by their resolved ports and has no subsets without pods", () => {
    const subsets = desiredSubsets(service(), [pod("a", "10.1.1.9"), pod("b", "10.1.1.10", { port: 9090 })]);
    expect(subsets?.map((s) => [s.ports, s.addresses?.map((a) => a.ip)])).toEqual([
      [[{ port: 8080, protocol: "TCP" }], ["10.1.1.9"]],
      [[{ port: 9090, protocol: "TCP" }], ["10.1.1.10"]],
    ]);
    expect(desiredSubsets(service(), [])).toEqual([]);
    expect(desiredSubsets(service({ selector: undefined }), [pod("a", "10.1.1.9")])).toBeUndefined();
  });

  it("labels the Endpoints with the Service's labels and skip-mirror", () => {
    expect(endpointsLabels(service())).toEqual({ team: "a", [LABEL_SKIP_MIRROR]: "true" });
  });
});

describe("EndpointsController in the API server", () => {
  let api: ApiServerHandle;
  const NS = "/api/v1/namespaces/default";
  beforeAll(async () => {
    api = await startApiServer({ inMemory: true });
  });
  afterAll(async () => {
    await api.stop();
  });

  it("keeps a Service's Endpoints in step with its pods and removes them with the Service", async () => {
    await call(api, "POST", `${NS}/services`, {
      metadata: { name: "web" },
      spec: { selector: { app: "web" }, ports: [{ name: "http", port: 80, targetPort: 8080 }] },
    });
    const empty = await eventually("the Endpoints", async () => {
      const r = await call(api, "GET", `${NS}/endpoints/web`);
      return r.code === 200 ? r.body : undefined;
    });
    expect(empty.subsets).toBeUndefined();
    expect((empty.metadata as KubeObject["metadata"]).labels).toEqual({ [LABEL_SKIP_MIRROR]: "true" });
    const created = await call(api, "POST", `${NS}/pods`, {
      metadata: { name: "p", labels: { app: "web" } },
      spec: { containers: [{ name: "c", image: "x" }] },
    });
    const status = { phase: "Running", podIP: "10.77.1.5", conditions: [{ type: "Ready", status: "True" }] };
    await call(api, "PUT", `${NS}/pods/p/status`, { ...created.body, status });
    const filled = await eventually("the pod in the Endpoints", async () => {
      const r = await call(api, "GET", `${NS}/endpoints/web`);
      return Array.isArray(r.body.subsets) ? r.body.subsets : undefined;
    });
    expect(filled).toMatchObject([
      {
        addresses: [{ ip: "10.77.1.5", targetRef: { kind: "Pod", name: "p" } }],
        ports: [{ name: "http", port: 8080 }],
      },
    ]);
    expect((await call(api, "DELETE", `${NS}/services/web`)).code).toBe(200);
    await eventually("the Endpoints gone", async () =>
      (await call(api, "GET", `${NS}/endpoints/web`)).code === 404 ? true : undefined,
    );
  });

  it("leaves the Endpoints of a Service without a selector to their user", async () => {
    await call(api, "POST", `${NS}/services`, { metadata: { name: "manual" }, spec: { ports: [{ port: 80 }] } });
    const mine = {
      metadata: { name: "manual" },
      subsets: [{ addresses: [{ ip: "10.77.9.9" }], ports: [{ port: 80 }] }],
    };
    expect((await call(api, "POST", `${NS}/endpoints`, mine)).code).toBe(201);
    await new Promise((r) => setTimeout(r, 200));
    expect((await call(api, "GET", `${NS}/endpoints/manual`)).body.subsets).toEqual(mine.subsets);
    expect((await call(api, "DELETE", `${NS}/services/manual`)).code).toBe(200);
    await new Promise((r) => setTimeout(r, 200));
    expect((await call(api, "GET", `${NS}/endpoints/manual`)).code).toBe(200);
  });
});
