/**
 * The EndpointSlice controller: the pure computation (which pods, which ports, which conditions, grouping) as a
 * table, and the controller against a real in-memory API server (slices follow pods and the Service, the labels
 * and owner a real cluster puts on them, the garbage collector removes them with their Service).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "../apiserver.ts";
import { call, eventually } from "../extensions/testdata/fixtures.ts";
import type { KubeObject } from "../types.ts";
import {
  CONTROLLER_NAME,
  desiredEndpointSlices,
  findPort,
  LABEL_HEADLESS,
  LABEL_MANAGED_BY,
  LABEL_SERVICE_NAME,
  MAX_ENDPOINTS_PER_SLICE,
  sliceLabels,
} from "./endpointslice.ts";

const service = (spec: Record<string, unknown> = {}, labels?: Record<string, string>): KubeObject => ({
  metadata: { name: "web", namespace: "ns", uid: "svc-uid", ...(labels ? { labels } : {}) },
  spec: { selector: { app: "web" }, ports: [{ name: "http", port: 80, targetPort: 8080, protocol: "TCP" }], ...spec },
});

interface PodOpts {
  ip?: string;
  ready?: boolean;
  phase?: string;
  labels?: Record<string, string>;
  deleting?: boolean;
  ports?: { name: string; containerPort: number; protocol?: string }[];
  node?: string;
}
const pod = (name: string, o: PodOpts = {}): KubeObject => ({
  metadata: {
    name,
    namespace: "ns",
    uid: `uid-${name}`,
    labels: o.labels ?? { app: "web" },
    ...(o.deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}),
  },
  spec: { nodeName: o.node ?? "node01", containers: [{ name: "c", ports: o.ports ?? [] }] },
  status: {
    phase: o.phase ?? "Running",
    ...(o.ip === "" ? {} : { podIP: o.ip ?? "10.1.1.2", podIPs: [{ ip: o.ip ?? "10.1.1.2" }] }),
    conditions: [{ type: "Ready", status: o.ready === false ? "False" : "True" }],
  },
});
const addrs = (slices: ReturnType<typeof desiredEndpointSlices>): string[][] =>
  slices.map((s) => s.endpoints.map((e) => e.addresses[0]));

describe("desiredEndpointSlices", () => {
  it("lists a selected running pod with its IP, node, reference and resolved port", () => {
    expect(desiredEndpointSlices(service(), [pod("a")])).toEqual([
      {
        addressType: "IPv4",
        ports: [{ name: "http", port: 8080, protocol: "TCP" }],
        endpoints: [
          {
            addresses: ["10.1.1.2"],
            conditions: { ready: true, serving: true, terminating: false },
            nodeName: "node01",
            targetRef: { kind: "Pod", namespace: "ns", name: "a", uid: "uid-a" },
          },
        ],
      },
    ]);
  });

  it.each([
    ["a pod of other labels", pod("a", { labels: { app: "db" } })],
    ["a pod without an IP", pod("a", { ip: "" })],
    ["a Succeeded pod", pod("a", { phase: "Succeeded" })],
    ["a Failed pod", pod("a", { phase: "Failed" })],
  ])("leaves out %s (one empty placeholder slice)", (_what, p) => {
    expect(desiredEndpointSlices(service(), [p])).toEqual([{ addressType: "IPv4", endpoints: [], ports: [] }]);
  });

  it.each([
    ["a ready pod", {}, { ready: true, serving: true, terminating: false }],
    ["an unready pod", { ready: false }, { ready: false, serving: false, terminating: false }],
    ["a terminating ready pod", { deleting: true }, { ready: false, serving: true, terminating: true }],
  ])("gives %s its conditions", (_what, o: PodOpts, conditions) => {
    expect(desiredEndpointSlices(service(), [pod("a", o)])[0]?.endpoints[0]?.conditions).toEqual(conditions);
  });

  it("marks unready pods ready with publishNotReadyAddresses", () => {
    const s = desiredEndpointSlices(service({ publishNotReadyAddresses: true }), [pod("a", { ready: false })]);
    expect(s[0]?.endpoints[0]?.conditions).toEqual({ ready: true, serving: true, terminating: false });
  });

  it("resolves a named targetPort per pod and groups pods by their ports", () => {
    const svc = service({ ports: [{ name: "ssh", port: 22, targetPort: "ssh", protocol: "TCP" }] });
    const slices = desiredEndpointSlices(svc, [
      pod("a", { ip: "10.1.1.2", ports: [{ name: "ssh", containerPort: 2222 }] }),
      pod("b", { ip: "10.1.1.3", ports: [{ name: "ssh", containerPort: 22 }] }),
      pod("c", { ip: "10.1.1.4", ports: [{ name: "ssh", containerPort: 2222 }] }),
      pod("d", { ip: "10.1.1.5", ports: [{ name: "ssh", containerPort: 22, protocol: "UDP" }] }),
    ]);
    expect(slices.map((s) => s.ports)).toEqual([
      [],
      [{ name: "ssh", port: 22, protocol: "TCP" }],
      [{ name: "ssh", port: 2222, protocol: "TCP" }],
    ]);
    expect(addrs(slices)).toEqual([["10.1.1.5"], ["10.1.1.3"], ["10.1.1.2", "10.1.1.4"]]);
  });

  it("splits a group every MAX_ENDPOINTS_PER_SLICE endpoints", () => {
    const pods = Array.from({ length: MAX_ENDPOINTS_PER_SLICE + 1 }, (_, i) =>
      pod(`p${String(i).padStart(3, "0")}`, { ip: `10.1.${Math.floor(i / 200)}.${(i % 200) + 2}` }),
    );
    expect(desiredEndpointSlices(service(), pods).map((s) => s.endpoints.length)).toEqual([MAX_ENDPOINTS_PER_SLICE, 1]);
  });

  it.each([
    ["without a selector", service({ selector: undefined })],
    ["of type ExternalName", service({ type: "ExternalName", externalName: "example.org" })],
  ])("manages no slice for a Service %s", (_what, svc) => {
    expect(desiredEndpointSlices(svc, [pod("a")])).toEqual([]);
  });

  it("finds ports by number, by name and protocol, and nothing else", () => {
    const p = pod("a", { ports: [{ name: "dns", containerPort: 53, protocol: "UDP" }] });
    expect(findPort(p, 9000, "TCP")).toBe(9000);
    expect(findPort(p, "dns", "UDP")).toBe(53);
    expect(findPort(p, "dns", "TCP")).toBeUndefined();
    expect(findPort(p, "", "TCP")).toBeUndefined();
  });

  it("labels slices with the Service's labels, its name, the manager and headlessness", () => {
    expect(sliceLabels(service({}, { team: "a" }))).toEqual({
      team: "a",
      [LABEL_SERVICE_NAME]: "web",
      [LABEL_MANAGED_BY]: CONTROLLER_NAME,
    });
    expect(sliceLabels(service({ clusterIP: "None" }))[LABEL_HEADLESS]).toBe("");
  });
});

describe("EndpointSliceController in the API server", () => {
  let api: ApiServerHandle;
  const NS = "/api/v1/namespaces/default";
  const SLICES = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices";
  beforeAll(async () => {
    api = await startApiServer({ inMemory: true });
  });
  afterAll(async () => {
    await api.stop();
  });

  const slicesOf = async (name: string): Promise<KubeObject[]> => {
    const r = await call(api, "GET", `${SLICES}?labelSelector=${encodeURIComponent(`${LABEL_SERVICE_NAME}=${name}`)}`);
    return (r.body.items as KubeObject[] | undefined) ?? [];
  };
  const setPodStatus = async (name: string, ip: string, ready: boolean): Promise<void> => {
    const cur = (await call(api, "GET", `${NS}/pods/${name}`)).body as KubeObject;
    const status = {
      phase: "Running",
      podIP: ip,
      podIPs: [{ ip }],
      conditions: [{ type: "Ready", status: ready ? "True" : "False" }],
    };
    expect((await call(api, "PUT", `${NS}/pods/${name}/status`, { ...cur, status })).code).toBe(200);
  };

  it("keeps a Service's slice in step with its pods and removes it with the Service", async () => {
    const svc = await call(api, "POST", `${NS}/services`, {
      metadata: { name: "vm-ssh", labels: { team: "x" } },
      spec: { selector: { app: "vm" }, ports: [{ port: 22, targetPort: "ssh" }] },
    });
    expect(svc.code).toBe(201);
    const placeholder = await eventually("the placeholder slice", async () => (await slicesOf("vm-ssh"))[0]);
    expect(placeholder).toMatchObject({
      addressType: "IPv4",
      endpoints: [],
      ports: [],
      metadata: {
        generateName: "vm-ssh-",
        labels: { team: "x", [LABEL_SERVICE_NAME]: "vm-ssh", [LABEL_MANAGED_BY]: CONTROLLER_NAME },
        ownerReferences: [
          { apiVersion: "v1", kind: "Service", name: "vm-ssh", uid: (svc.body.metadata as { uid: string }).uid },
        ],
      },
    });
    const created = await call(api, "POST", `${NS}/pods`, {
      metadata: { name: "launcher", labels: { app: "vm" } },
      spec: { containers: [{ name: "compute", image: "x", ports: [{ name: "ssh", containerPort: 22 }] }] },
    });
    expect(created.code).toBe(201);
    await setPodStatus("launcher", "10.77.1.5", true);
    const filled = await eventually("the pod in the slice", async () => {
      const s = (await slicesOf("vm-ssh"))[0] as { endpoints?: { addresses: string[] }[] } | undefined;
      return s?.endpoints?.length === 1 ? s : undefined;
    });
    expect(filled).toMatchObject({
      metadata: { name: placeholder.metadata.name },
      ports: [{ name: "", port: 22, protocol: "TCP" }],
      endpoints: [{ addresses: ["10.77.1.5"], conditions: { ready: true, serving: true, terminating: false } }],
    });
    await setPodStatus("launcher", "10.77.1.5", false);
    await eventually("the endpoint unready", async () => {
      const s = (await slicesOf("vm-ssh"))[0] as { endpoints?: { conditions: { ready: boolean } }[] } | undefined;
      return s?.endpoints?.[0]?.conditions.ready === false ? true : undefined;
    });
    expect((await call(api, "DELETE", `${NS}/services/vm-ssh`)).code).toBe(200);
    await eventually("the slice gone", async () => ((await slicesOf("vm-ssh")).length === 0 ? true : undefined));
  });

  it("puts back a managed slice someone deleted", async () => {
    await call(api, "POST", `${NS}/services`, { metadata: { name: "again" }, spec: { selector: { a: "b" } } });
    const first = await eventually("a slice", async () => (await slicesOf("again"))[0]);
    expect((await call(api, "DELETE", `${SLICES}/${first.metadata.name ?? ""}`)).code).toBe(200);
    const second = await eventually("a new slice", async () => {
      const s = (await slicesOf("again"))[0];
      return s && s.metadata.name !== first.metadata.name ? s : undefined;
    });
    expect(second.metadata.labels?.[LABEL_MANAGED_BY]).toBe(CONTROLLER_NAME);
  });
});
