import { describe, expect, it } from "vitest";
import type { V1PersistentVolumeClaim } from "../cluster/kube-models.ts";
import { localPathStorageClass, localPathVolume, volumeDirFor } from "./local-path.ts";
import { isInside } from "./provisioner-writes.ts";

const claim = (modes: string[]): V1PersistentVolumeClaim => ({
  metadata: { name: "data", namespace: "vms", uid: "1234", resourceVersion: "7" },
  spec: { accessModes: modes, resources: { requests: { storage: "5Gi" } }, volumeMode: "Filesystem" },
});
const node = { metadata: { name: "node02", labels: { "kubernetes.io/hostname": "node02" } } };

describe("localPathVolume()", () => {
  it("makes a ReadWriteOnce claim's PV: its directory, size, modes, class policy, claimRef and the node", () => {
    const pv = localPathVolume(claim(["ReadWriteOnce"]), localPathStorageClass(), "/data/storage", node);
    expect(pv).toEqual({
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: {
        name: "pvc-1234",
        annotations: { "pv.kubernetes.io/provisioned-by": "rancher.io/local-path" },
        labels: {},
      },
      spec: {
        capacity: { storage: "5Gi" },
        accessModes: ["ReadWriteOnce"],
        volumeMode: "Filesystem",
        persistentVolumeReclaimPolicy: "Delete",
        storageClassName: "local-path",
        hostPath: { path: "/data/storage/pvc-1234_vms_data", type: "DirectoryOrCreate" },
        claimRef: {
          apiVersion: "v1",
          kind: "PersistentVolumeClaim",
          namespace: "vms",
          name: "data",
          uid: "1234",
          resourceVersion: "7",
        },
        nodeAffinity: {
          required: {
            nodeSelectorTerms: [
              { matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In", values: ["node02"] }] },
            ],
          },
        },
      },
    });
  });

  it("gives a ReadWriteMany claim a directory every node sees (no node affinity)", () => {
    const pv = localPathVolume(claim(["ReadWriteMany"]), localPathStorageClass(), "/data/storage", node);
    expect(pv.spec?.nodeAffinity).toBeUndefined();
    expect(pv.spec?.hostPath?.path).toBe(volumeDirFor("/data/storage", claim(["ReadWriteMany"])));
  });

  it("is the default WaitForFirstConsumer class with reclaim policy Delete", () => {
    expect(localPathStorageClass()).toMatchObject({
      metadata: { name: "local-path", annotations: { "storageclass.kubernetes.io/is-default-class": "true" } },
      provisioner: "rancher.io/local-path",
      reclaimPolicy: "Delete",
      volumeBindingMode: "WaitForFirstConsumer",
    });
  });
});

describe("isInside()", () => {
  it.each([
    ["/data/storage", "/data/storage/pvc-1_a_b", true],
    ["/data/storage", "/data/storage", false],
    ["/data/storage", "/data/storage/../etc", false],
    ["/data/storage", "/data/storage-other/x", false],
  ])("%s contains %s: %s", (dir, path, inside) => {
    expect(isInside(dir, path)).toBe(inside);
  });
});
