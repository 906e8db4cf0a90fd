import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "../apiserver.ts";
import { call, eventually } from "../extensions/testdata/fixtures.ts";
import { bootstrapPolicy, ensureBootstrapPolicy } from "./bootstrap-policy.ts";

let api: ApiServerHandle;
const RBAC = "/apis/rbac.authorization.k8s.io/v1";

beforeAll(async () => {
  api = await startApiServer({ inMemory: true });
});
afterAll(() => api?.stop());

const get = async (path: string): Promise<Record<string, unknown>> => (await call(api, "GET", `${RBAC}/${path}`)).body;
const rv = (o: Record<string, unknown>): unknown => (o.metadata as { resourceVersion?: string }).resourceVersion;

describe("the bootstrap policy", () => {
  it("is created at start: every role and binding, cluster-admin bound to system:masters", async () => {
    for (const o of bootstrapPolicy()) {
      const plural = o.kind === "ClusterRole" ? "clusterroles" : "clusterrolebindings";
      expect((await get(`${plural}/${o.metadata.name}`)).kind, o.metadata.name).toBe(o.kind);
    }
    expect((await get("clusterrolebindings/cluster-admin")).subjects).toEqual([
      { apiGroup: "rbac.authorization.k8s.io", kind: "Group", name: "system:masters" },
    ]);
  });

  it("puts back a changed role, leaves one whose autoupdate is false, and leaves aggregated rules alone", async () => {
    const basic = await get("clusterroles/system:basic-user");
    await call(api, "PUT", `${RBAC}/clusterroles/system:basic-user`, { ...basic, rules: [] });
    const pub = await get("clusterroles/system:public-info-viewer");
    const meta = pub.metadata as { annotations: Record<string, string> };
    const pinned = {
      ...pub,
      metadata: {
        ...meta,
        annotations: { ...meta.annotations, "rbac.authorization.kubernetes.io/autoupdate": "false" },
      },
      rules: [],
    };
    expect((await call(api, "PUT", `${RBAC}/clusterroles/system:public-info-viewer`, pinned)).code).toBe(200);
    const view = await eventually("view's aggregated rules", async () => {
      const v = await get("clusterroles/view");
      return Array.isArray(v.rules) && v.rules.length > 0 ? v : undefined;
    });
    await ensureBootstrapPolicy(api.service);
    expect((await get("clusterroles/system:basic-user")).rules).toEqual(basic.rules);
    expect((await get("clusterroles/system:public-info-viewer")).rules).toEqual([]);
    expect(rv(await get("clusterroles/view"))).toBe(rv(view));
  });
});
