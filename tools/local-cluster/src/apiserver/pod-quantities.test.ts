/**
 * A Pod's resource quantities through a started API server, as kube-apiserver answers them (issue 23: `1e400`,
 * `99999999999999999999Ei`, `0` and `-1Gi` were stored verbatim): a value that does not parse is 400 from the
 * decoder, a negative one or a request above its limit is 422 with kube's field and message, and what is stored is
 * the canonical form kube-apiserver stores (it sets no upper bound: 1e400 is a valid, unschedulable request).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "./apiserver.ts";
import { call } from "./extensions/testdata/fixtures.ts";

let api: ApiServerHandle;
const PODS = "/api/v1/namespaces/default/pods";
let n = 0;

function pod(resources: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: `q${n++}` },
    spec: { containers: [{ name: "c", image: "busybox", resources }], ...extra },
  };
}

beforeAll(async () => {
  api = await startApiServer({ inMemory: true });
});

afterAll(async () => {
  await api.stop();
});

describe("pod quantities", () => {
  it.each([
    ["1e400", "10e399"],
    ["99999999999999999999Ei", "9223372036854775807"],
    ["0", "0"],
    ["1024Mi", "1Gi"],
    ["0.5", "500m"],
    [64, "64"],
  ])("memory %s is stored as kube-apiserver stores it: %s", async (value, stored) => {
    const r = await call(api, "POST", PODS, pod({ limits: { memory: value }, requests: { memory: value } }));
    expect(r.code).toBe(201);
    const got = await call(api, "GET", `${PODS}/${(r.body.metadata as { name: string }).name}`);
    const c = (got.body.spec as { containers: { resources: unknown }[] }).containers[0];
    expect(c.resources).toEqual({ limits: { memory: stored }, requests: { memory: stored } });
  });

  it.each([
    ["limits", "memory", "-1Gi"],
    ["requests", "memory", "-1Gi"],
    ["limits", "cpu", "-100m"],
    ["requests", "cpu", "-1"],
  ])("a negative %s[%s] %s is 422 must be greater than or equal to 0", async (kind, name, value) => {
    const p = pod({ [kind]: { [name]: value } });
    const r = await call(api, "POST", PODS, p);
    expect(r.code).toBe(422);
    // A limit without its request is also the request (kube's SetDefaults_Pod), so both are refused, as there.
    const fields = (kind === "limits" ? ["limits", "requests"] : [kind]).map(
      (k) => `spec.containers[0].resources.${k}[${name}]`,
    );
    const causes = fields.map((f) => `${f}: Invalid value: "${value}": must be greater than or equal to 0`);
    expect(r.body).toMatchObject({
      reason: "Invalid",
      message: `Pod "${p.metadata.name}" is invalid: ${causes.length > 1 ? `[${causes.join(", ")}]` : causes[0]}`,
      details: { causes: fields.map((field) => ({ reason: "FieldValueInvalid", field })) },
    });
    expect((await call(api, "GET", `${PODS}/${p.metadata.name}`)).code).toBe(404);
  });

  it.each([
    ["abc", "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"],
    ["1Qi", "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"],
    ["1e3000000000", "unable to parse quantity's suffix"],
    [{ a: 1 }, "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"],
  ])("%j does not decode: 400 as kube's decoder answers", async (value, message) => {
    const p = pod({ limits: { memory: value } });
    const r = await call(api, "POST", PODS, p);
    expect(r.code).toBe(400);
    expect(r.body).toMatchObject({
      reason: "BadRequest",
      message: `Pod in version "v1" cannot be handled as a Pod: ${message}`,
    });
    expect((await call(api, "GET", `${PODS}/${p.metadata.name}`)).code).toBe(404);
  });

  it.each([
    [
      { limits: [{ memory: "128Mi" }] },
      "array into Go struct field ResourceRequirements.spec.containers.resources.limits of type v1.ResourceList",
    ],
    [
      { requests: "1Gi" },
      "string into Go struct field ResourceRequirements.spec.containers.resources.requests of type v1.ResourceList",
    ],
  ])("resources %j do not decode: 400 (fuzz lane: an array of limits was stored)", async (resources, message) => {
    const p = pod(resources);
    const r = await call(api, "POST", PODS, p);
    expect(r.code).toBe(400);
    expect(r.body.message).toBe(`Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal ${message}`);
  });

  it("containers that are not a list of objects do not decode", async () => {
    const p = { apiVersion: "v1", kind: "Pod", metadata: { name: "odd" }, spec: { containers: { name: "c" } } };
    expect((await call(api, "POST", PODS, p)).body.message).toBe(
      'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal object into Go struct field PodSpec.spec.containers of type []v1.Container',
    );
  });

  it("requests above limits are 422 with kube's message on the requests path", async () => {
    const p = pod({ limits: { memory: "1Gi", cpu: "1" }, requests: { memory: "2Gi", cpu: "500m" } });
    const r = await call(api, "POST", PODS, p);
    expect(r.code).toBe(422);
    expect(r.body.message).toBe(
      `Pod "${p.metadata.name}" is invalid: spec.containers[0].resources.requests: Invalid value: "2Gi": must be less than or equal to memory limit of 1Gi`,
    );
  });

  it("extended resources are whole numbers and requests equal limits", async () => {
    const p = pod({
      limits: { "devices.kubevirt.io/kvm": "1" },
      requests: { "devices.kubevirt.io/kvm": "500m" },
    });
    const r = await call(api, "POST", PODS, p);
    expect(r.code).toBe(422);
    expect(r.body.details).toMatchObject({
      causes: [
        {
          field: "spec.containers[0].resources.requests[devices.kubevirt.io/kvm]",
          message: 'Invalid value: "500m": must be an integer',
        },
        {
          field: "spec.containers[0].resources.requests",
          message: 'Invalid value: "500m": must be equal to devices.kubevirt.io/kvm limit of 1',
        },
      ],
    });
  });

  it("init containers and the pod overhead are checked too", async () => {
    const p = pod({}, { initContainers: [{ name: "i", image: "busybox", resources: { limits: { cpu: "-1" } } }] });
    expect((await call(api, "POST", PODS, p)).body.message).toContain(
      'spec.initContainers[0].resources.limits[cpu]: Invalid value: "-1": must be greater than or equal to 0',
    );
    const o = pod({}, { overhead: { memory: "-1Mi" } });
    expect((await call(api, "POST", PODS, o)).body.message).toContain(
      'spec.overhead[memory]: Invalid value: "-1Mi": must be greater than or equal to 0',
    );
  });
});

describe("node quantities", () => {
  const NODES = "/api/v1/nodes";
  const node = (name: string, capacity: Record<string, unknown>) => ({
    apiVersion: "v1",
    kind: "Node",
    metadata: { name },
    status: { capacity, allocatable: capacity },
  });

  it("a kubelet's capacity and allocatable are stored canonical, on create and through the status subresource", async () => {
    // Found on kube-apiserver: a kubelet's devices.kubevirt.io/kvm of 1000 reads back as "1k" there.
    const r = await call(api, "POST", NODES, node("nq1", { "devices.kubevirt.io/kvm": "1000", memory: "1024Mi" }));
    expect(r.code).toBe(201);
    expect((r.body.status as { capacity: unknown }).capacity).toEqual({
      "devices.kubevirt.io/kvm": "1k",
      memory: "1Gi",
    });
    const patched = await call(
      api,
      "PATCH",
      `${NODES}/nq1/status`,
      { status: { allocatable: { "devices.kubevirt.io/tun": "2000", cpu: "0.5" } } },
      "application/merge-patch+json",
    );
    expect(patched.code).toBe(200);
    expect((patched.body.status as { allocatable: unknown }).allocatable).toMatchObject({
      "devices.kubevirt.io/tun": "2k",
      cpu: "500m",
    });
  });

  it("a capacity that is not a quantity is kube-apiserver's 400", async () => {
    const r = await call(api, "POST", NODES, node("nq2", { memory: "lots" }));
    expect(r.code).toBe(400);
    expect(r.body.message).toBe(
      "Node in version \"v1\" cannot be handled as a Node: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
    );
  });
});
