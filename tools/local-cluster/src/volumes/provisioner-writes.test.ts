/**
 * The writes both in-process provisioners share, against the embedded API server: a retried create, a delete of a
 * volume gone already, and the uid precondition that keeps a reclaim off a newer volume of the same name.
 */
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServerHandle, startApiServer } from "../apiserver/apiserver.ts";
import { ApiError } from "../apiserver/errors.ts";
import { eventually } from "../apiserver/extensions/testdata/fixtures.ts";
import { systemContext } from "../apiserver/rest/service.ts";
import type { V1PersistentVolume, V1PersistentVolumeClaim, V1StorageClass } from "../cluster/kube-models.ts";
import { createVolume, deleteVolume, ensureStorageClass, requireNode } from "./provisioner-writes.ts";

let api: ApiServerHandle;
const ctx = systemContext("system:serviceaccount:kube-system:test-provisioner");
const PV = "core/persistentvolumes";

beforeAll(async () => {
  api = await startApiServer({ inMemory: true, tls: false, logger: pino({ level: "silent" }) });
});
afterAll(async () => {
  await api?.stop();
});

const volume = (name: string): V1PersistentVolume => ({
  apiVersion: "v1",
  kind: "PersistentVolume",
  metadata: { name },
  spec: {
    capacity: { storage: "1Gi" },
    accessModes: ["ReadWriteOnce"],
    persistentVolumeReclaimPolicy: "Delete",
    hostPath: { path: `/tmp/kvt-never-made/${name}` },
  },
});
const stored = (name: string): V1PersistentVolume | undefined =>
  api.service.store.get(PV, name)?.obj as V1PersistentVolume | undefined;
const goneEventually = (name: string): Promise<true> =>
  eventually(`PV ${name} gone`, async () => (stored(name) ? undefined : true));

describe("createVolume()", () => {
  it("creates the PV, and a retry that finds it made is no error", async () => {
    await createVolume(api.service, volume("pv-retry"), ctx);
    const uid = stored("pv-retry")?.metadata?.uid;
    expect(uid).toBeTruthy();
    await expect(createVolume(api.service, volume("pv-retry"), ctx)).resolves.toBeUndefined();
    expect(stored("pv-retry")?.metadata?.uid).toBe(uid);
  });

  it("passes on other refusals (an invalid PV)", async () => {
    const bad = volume("pv-invalid");
    delete bad.spec!.capacity;
    await expect(createVolume(api.service, bad, ctx)).rejects.toMatchObject({ code: 422 });
    expect(stored("pv-invalid")).toBeUndefined();
  });
});

describe("deleteVolume()", () => {
  it("deletes the PV, and one gone already is no error", async () => {
    await createVolume(api.service, volume("pv-delete"), ctx);
    const made = stored("pv-delete")!;
    await deleteVolume(api.service, made, ctx);
    await goneEventually("pv-delete");
    await expect(deleteVolume(api.service, made, ctx)).resolves.toBeUndefined();
  });

  it("refuses to delete a newer PV of the same name (uid precondition)", async () => {
    await createVolume(api.service, volume("pv-reused"), ctx);
    const old = stored("pv-reused")!;
    await deleteVolume(api.service, old, ctx);
    await goneEventually("pv-reused");
    await createVolume(api.service, volume("pv-reused"), ctx);
    const err = await deleteVolume(api.service, old, ctx).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).code).toBe(409);
    expect(stored("pv-reused")?.metadata?.uid).not.toBe(old.metadata?.uid);
  });
});

describe("requireNode()", () => {
  const claim = (modes: string[]): V1PersistentVolumeClaim => ({ spec: { accessModes: modes } });
  it("refuses a single-node claim with no selected node, with external-provisioner's message", () => {
    expect(() => requireNode(claim(["ReadWriteOnce"]), undefined)).toThrow(
      "configuration error, no node was specified",
    );
    expect(() => requireNode(claim(["ReadWriteOnce"]), { metadata: { name: "node01" } })).not.toThrow();
  });
  it("lets a shared claim go without a node", () => {
    expect(() => requireNode(claim(["ReadWriteMany"]), undefined)).not.toThrow();
    expect(() => requireNode(claim(["ReadOnlyMany"]), undefined)).not.toThrow();
  });
});

describe("ensureStorageClass()", () => {
  it("creates the class once: a later call leaves the stored one (and an admin's edits) as it is", async () => {
    const sc: V1StorageClass = {
      apiVersion: "storage.k8s.io/v1",
      kind: "StorageClass",
      metadata: { name: "test-class" },
      provisioner: "example.com/test",
      reclaimPolicy: "Delete",
    };
    await ensureStorageClass(api.service, sc);
    const policy = (): string | undefined =>
      (api.service.store.get("storage.k8s.io/storageclasses", "test-class")?.obj as V1StorageClass | undefined)
        ?.reclaimPolicy;
    expect(policy()).toBe("Delete");
    await ensureStorageClass(api.service, { ...sc, reclaimPolicy: "Retain" });
    expect(policy()).toBe("Delete");
  });
});
