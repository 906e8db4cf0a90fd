/**
 * Black-box suite with @kubernetes/client-node 2.x: CRUD and patches through the generated clients, conflicts, an
 * informer that relists after a 410 caused by compaction, and a watch that resumes after the client's own cut.
 */
import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "./apiserver.ts";

let server: ApiServerHandle;
let kc: k8s.KubeConfig;
let core: k8s.CoreV1Api;
let leases: k8s.CoordinationV1Api;

const mergePatch = k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch);

beforeAll(async () => {
  server = await startApiServer({ inMemory: true });
  kc = new k8s.KubeConfig();
  kc.loadFromFile(server.kubeconfigPath);
  core = kc.makeApiClient(k8s.CoreV1Api);
  leases = kc.makeApiClient(k8s.CoordinationV1Api);
  await core.createNamespace({ body: { metadata: { name: "a" } } });
  await core.createNamespace({ body: { metadata: { name: "b" } } });
}, 30_000);

afterAll(async () => {
  await server?.stop();
});

async function eventually(check: () => boolean, timeoutMs = 15_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`condition not met in time: ${check.toString()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("@kubernetes/client-node against the embedded API server", () => {
  it("creates, reads, lists, patches, replaces and deletes", async () => {
    const cm = await core.createNamespacedConfigMap({
      namespace: "a",
      body: { metadata: { name: "c1", labels: { app: "x" } }, data: { k: "v" } },
    });
    expect(cm.metadata?.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(cm.metadata?.creationTimestamp).toBeInstanceOf(Date);
    const got = await core.readNamespacedConfigMap({ namespace: "a", name: "c1" });
    expect(got.data).toEqual({ k: "v" });
    const list = await core.listNamespacedConfigMap({ namespace: "a", labelSelector: "app=x" });
    expect(list.items.map((i) => i.metadata?.name)).toEqual(["c1"]);
    expect(Number(list.metadata?.resourceVersion)).toBeGreaterThanOrEqual(Number(cm.metadata?.resourceVersion));
    const patched = await core.patchNamespacedConfigMap(
      { namespace: "a", name: "c1", body: { data: { k: "w" } } },
      mergePatch,
    );
    expect(patched.data).toEqual({ k: "w" });
    const jp = await core.patchNamespacedConfigMap({
      namespace: "a",
      name: "c1",
      body: [{ op: "add", path: "/data/j", value: "1" }],
    });
    expect(jp.data).toEqual({ k: "w", j: "1" });
    await expect(
      core.patchNamespacedConfigMap({ namespace: "a", name: "c1", body: { data: { k: "z" } } }),
    ).rejects.toMatchObject({ code: 400 });
    const noop = await core.patchNamespacedConfigMap(
      { namespace: "a", name: "c1", body: { data: { k: "w" } } },
      mergePatch,
    );
    expect(noop.metadata?.resourceVersion).toBe(jp.metadata?.resourceVersion);
    await expect(
      core.replaceNamespacedConfigMap({ namespace: "a", name: "c1", body: { ...cm, data: { k: "stale" } } }),
    ).rejects.toMatchObject({ code: 409 });
    await core.deleteNamespacedConfigMap({ namespace: "a", name: "c1" });
    await expect(core.readNamespacedConfigMap({ namespace: "a", name: "c1" })).rejects.toMatchObject({ code: 404 });
    await expect(
      core.createNamespacedConfigMap({ namespace: "nope", body: { metadata: { name: "c" } } }),
    ).rejects.toMatchObject({ code: 404 });
  });

  it("pages lists with limit and continue", async () => {
    for (let i = 0; i < 5; i++)
      await core.createNamespacedConfigMap({ namespace: "b", body: { metadata: { name: `p${i}` } } });
    const first = await core.listNamespacedConfigMap({ namespace: "b", limit: 2 });
    // Every namespace also holds the root CA publisher's kube-root-ca.crt, first by name.
    expect(first.items.map((i) => i.metadata?.name)).toEqual(["kube-root-ca.crt", "p0"]);
    expect(first.metadata?.remainingItemCount).toBe(4);
    const second = await core.listNamespacedConfigMap({
      namespace: "b",
      limit: 10,
      _continue: first.metadata?._continue,
    });
    expect(second.items.map((i) => i.metadata?.name)).toEqual(["p1", "p2", "p3", "p4"]);
    expect(second.metadata?._continue).toBeUndefined();
  });

  it("lets exactly one of two lease holders win a PUT race", async () => {
    const lease = await leases.createNamespacedLease({
      namespace: "a",
      body: { metadata: { name: "leader" }, spec: { holderIdentity: "", leaseDurationSeconds: 15 } },
    });
    const take = (who: string) =>
      leases
        .replaceNamespacedLease({
          namespace: "a",
          name: "leader",
          body: { ...lease, spec: { ...lease.spec, holderIdentity: who } },
        })
        .then(
          () => "won",
          (e: { code?: number }) => `lost ${e.code}`,
        );
    const results = await Promise.all([take("one"), take("two")]);
    expect(results.sort()).toEqual(["lost 409", "won"]);
  });

  it("runs an informer that relists after a 410 and resumes after its watch is cut", async () => {
    const watch = new k8s.Watch(kc);
    // client-node cuts its watches after 30 s (private requestTimeoutMs); shorten it so the test sees the cut.
    (watch as unknown as { requestTimeoutMs: number }).requestTimeoutMs = 1500;
    let lists = 0;
    const listFn = async () => {
      lists++;
      return core.listNamespacedConfigMap({ namespace: "a" });
    };
    const informer = new k8s.ListWatch<k8s.V1ConfigMap>("/api/v1/namespaces/a/configmaps", watch, listFn, false);
    const seen: string[] = [];
    informer.on(k8s.ADD, (o) => seen.push(`add ${o.metadata?.name}`));
    informer.on(k8s.UPDATE, (o) => seen.push(`update ${o.metadata?.name}`));
    informer.on(k8s.DELETE, (o) => seen.push(`delete ${o.metadata?.name}`));
    await informer.start();
    try {
      await core.createNamespacedConfigMap({ namespace: "a", body: { metadata: { name: "i1" } } });
      await eventually(() => seen.includes("add i1"));
      expect(lists).toBe(1);
      // Quiet for longer than the client's 1.5 s cut: it must resume from its resourceVersion, without a relist.
      await new Promise((r) => setTimeout(r, 2500));
      await core.createNamespacedConfigMap({ namespace: "a", body: { metadata: { name: "i2" } } });
      await eventually(() => seen.includes("add i2"));
      expect(lists).toBe(1);
      // Writes elsewhere, then compaction past the informer's resourceVersion: the next watch gets 410 and it relists.
      await core.createNamespacedConfigMap({ namespace: "b", body: { metadata: { name: "elsewhere" } } });
      server.compact();
      await eventually(() => lists >= 2, 20_000);
      await core.patchNamespacedConfigMap({ namespace: "a", name: "i1", body: { data: { x: "1" } } }, mergePatch);
      await eventually(() => seen.includes("update i1"));
      await core.deleteNamespacedConfigMap({ namespace: "a", name: "i2" });
      await eventually(() => seen.includes("delete i2"));
      expect(seen.filter((s) => s === "add i1")).toHaveLength(1);
      expect(
        informer
          .list()
          .map((o) => o.metadata?.name)
          .sort(),
      ).toEqual(["i1", "kube-root-ca.crt"]);
    } finally {
      await informer.stop();
    }
  }, 40_000);

  it("watches with selector transitions: objects entering and leaving the selector are ADDED and DELETED", async () => {
    const events: string[] = [];
    const w = new k8s.Watch(kc);
    const req = await w.watch(
      "/api/v1/namespaces/b/configmaps",
      {
        labelSelector: "team=red",
        resourceVersion: (await core.listNamespacedConfigMap({ namespace: "b" })).metadata?.resourceVersion,
      },
      (type, obj: k8s.V1ConfigMap) => events.push(`${type} ${obj.metadata?.name}`),
      () => undefined,
    );
    try {
      await core.createNamespacedConfigMap({ namespace: "b", body: { metadata: { name: "t1" } } });
      await core.patchNamespacedConfigMap(
        { namespace: "b", name: "t1", body: { metadata: { labels: { team: "red" } } } },
        mergePatch,
      );
      await core.patchNamespacedConfigMap({ namespace: "b", name: "t1", body: { data: { a: "b" } } }, mergePatch);
      await core.patchNamespacedConfigMap(
        { namespace: "b", name: "t1", body: { metadata: { labels: { team: "blue" } } } },
        mergePatch,
      );
      await eventually(() => events.length >= 3);
      expect(events).toEqual(["ADDED t1", "MODIFIED t1", "DELETED t1"]);
    } finally {
      req.abort();
    }
  });
});
