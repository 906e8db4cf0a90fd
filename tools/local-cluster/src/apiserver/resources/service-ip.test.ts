/**
 * ClusterIP allocation as kube-apiserver's: allocated on create from `--service-cluster-ip-range`, `None` for
 * headless, 422 for an address outside the range or already taken, immutable on update, carried over when an
 * update leaves it out; and the allocator alone (full range, reservations, static band).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "../apiserver.ts";
import { call } from "../extensions/testdata/fixtures.ts";
import type { KubeObject } from "../types.ts";
import { ClusterIpAllocator, ipv4ToNumber, RESERVATION_MS } from "./service-ip.ts";

const SVCS = "/api/v1/namespaces/default/services";
const svc = (name: string, spec: Record<string, unknown> = {}) => ({
  apiVersion: "v1",
  kind: "Service",
  metadata: { name },
  spec: { selector: { app: name }, ports: [{ port: 80 }], ...spec },
});
const inRange = (ip: unknown): boolean => {
  const n = ipv4ToNumber(String(ip)) ?? 0;
  return n > (ipv4ToNumber("10.123.0.0") ?? 0) && n < (ipv4ToNumber("10.123.0.255") ?? 0);
};

describe("Service ClusterIPs through the API server", () => {
  let api: ApiServerHandle;
  beforeAll(async () => {
    api = await startApiServer({ inMemory: true, serviceClusterIpRange: "10.123.0.0/24" });
  });
  afterAll(async () => {
    await api.stop();
  });

  it("allocates a free address of the range on create, with kube's defaults", async () => {
    const r = await call(api, "POST", SVCS, svc("a"));
    expect(r.code).toBe(201);
    const spec = r.body.spec as Record<string, unknown>;
    expect(inRange(spec.clusterIP)).toBe(true);
    expect(spec.clusterIPs).toEqual([spec.clusterIP]);
    expect(spec).toMatchObject({
      type: "ClusterIP",
      ipFamilies: ["IPv4"],
      ipFamilyPolicy: "SingleStack",
      sessionAffinity: "None",
      ports: [{ port: 80, protocol: "TCP", targetPort: 80 }],
    });
  });

  it("keeps a chosen free address and refuses it for the next Service (422, already allocated)", async () => {
    expect((await call(api, "POST", SVCS, svc("b", { clusterIP: "10.123.0.10" }))).body.spec).toMatchObject({
      clusterIP: "10.123.0.10",
      clusterIPs: ["10.123.0.10"],
    });
    const r = await call(api, "POST", SVCS, svc("c", { clusterIP: "10.123.0.10" }));
    expect(r.code).toBe(422);
    expect(r.body.message).toBe(
      'Service "c" is invalid: spec.clusterIPs: Invalid value: ["10.123.0.10"]: failed to allocate IP 10.123.0.10: provided IP is already allocated',
    );
    expect((await call(api, "GET", `${SVCS}/c`)).code).toBe(404);
  });

  it.each([
    [
      "outside the range",
      "10.96.0.10",
      "the provided IP (10.96.0.10) is not in the valid range. The range of valid IPs is 10.123.0.0/24",
    ],
    [
      "the network address",
      "10.123.0.0",
      "the provided IP (10.123.0.0) is not in the valid range. The range of valid IPs is 10.123.0.0/24",
    ],
  ])("refuses an address %s with 422", async (_what, ip, why) => {
    const r = await call(api, "POST", SVCS, svc("d", { clusterIP: ip }));
    expect(r.code).toBe(422);
    expect(r.body.details).toMatchObject({
      causes: [{ reason: "FieldValueInvalid", field: "spec.clusterIPs", message: expect.stringContaining(why) }],
    });
  });

  it("refuses a value that is no IP address", async () => {
    const r = await call(api, "POST", SVCS, svc("e", { clusterIP: "ten" }));
    expect(r.code).toBe(422);
    expect(r.body.message).toContain('spec.clusterIPs[0]: Invalid value: "ten": must be a valid IP address');
  });

  it("makes a headless Service for None and allocates nothing for ExternalName", async () => {
    const h = await call(api, "POST", SVCS, svc("headless", { clusterIP: "None" }));
    expect(h.body.spec).toMatchObject({ clusterIP: "None", clusterIPs: ["None"] });
    const x = await call(api, "POST", SVCS, {
      ...svc("ext", { type: "ExternalName", externalName: "example.org" }),
    });
    expect(x.code).toBe(201);
    expect((x.body.spec as Record<string, unknown>).clusterIP).toBeUndefined();
  });

  it("keeps the address when an update leaves it out and refuses to change it", async () => {
    const created = (await call(api, "POST", SVCS, svc("f"))).body as KubeObject;
    const ip = (created.spec as { clusterIP: string }).clusterIP;
    const put = await call(api, "PUT", `${SVCS}/f`, svc("f", { ports: [{ port: 81 }] }));
    expect(put.code).toBe(200);
    expect(put.body.spec).toMatchObject({ clusterIP: ip, clusterIPs: [ip], ports: [{ port: 81 }] });
    const other = ip === "10.123.0.20" ? "10.123.0.21" : "10.123.0.20";
    const change = await call(api, "PUT", `${SVCS}/f`, svc("f", { clusterIP: other, clusterIPs: [other] }));
    expect(change.code).toBe(422);
    expect(change.body.message).toBe(
      `Service "f" is invalid: spec.clusterIPs[0]: Invalid value: ["${other}"]: may not change once set`,
    );
  });

  it("frees the address of a deleted Service", async () => {
    expect((await call(api, "POST", SVCS, svc("g", { clusterIP: "10.123.0.11" }))).code).toBe(201);
    expect((await call(api, "DELETE", `${SVCS}/g`)).code).toBe(200);
    expect((await call(api, "POST", SVCS, svc("h", { clusterIP: "10.123.0.11" }))).code).toBe(201);
  });
});

describe("ClusterIpAllocator", () => {
  it("hands every address of a small range out once, then reports the range full", () => {
    let now = 0;
    const a = new ClusterIpAllocator(
      "10.0.0.0/29",
      () => [],
      () => now,
    );
    const got = Array.from({ length: 6 }, (_, i) => a.allocate(`uid-${i}`));
    expect(new Set(got)).toEqual(new Set(["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"]));
    expect(a.allocate("uid-7")).toBeUndefined();
    now += RESERVATION_MS + 1; // none was stored: the reservations lapse
    expect(a.allocate("uid-8")).toBeDefined();
  });

  it("takes dynamic addresses above the static band first", () => {
    const a = new ClusterIpAllocator("10.0.0.0/24", () => []);
    for (let i = 0; i < 50; i++) {
      const n = ipv4ToNumber(a.allocate(`u${i}`) ?? "") ?? 0;
      expect(n & 255).toBeGreaterThanOrEqual(16);
    }
  });

  it("counts stored Services' addresses as used, except the Service's own", () => {
    const stored = [{ metadata: { uid: "x" }, spec: { clusterIP: "10.0.0.5" } }] as KubeObject[];
    const a = new ClusterIpAllocator("10.0.0.0/24", () => stored);
    expect(a.claim("10.0.0.5", "y")).toBe("provided IP is already allocated");
    expect(a.claim("10.0.0.5", "x")).toBeUndefined();
  });

  it("refuses a range it cannot use", () => {
    expect(() => new ClusterIpAllocator("10.0.0.1/24", () => [])).toThrow(/host bits set/);
    expect(() => new ClusterIpAllocator("fd00::/64", () => [])).toThrow(/IPv4 CIDR/);
  });
});
