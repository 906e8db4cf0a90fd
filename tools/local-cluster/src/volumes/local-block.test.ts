import { describe, expect, it } from "vitest";
import type { V1PersistentVolumeClaim } from "../cluster/kube-models.ts";
import { backingFileOf, deviceBytes, deviceLinkFor, localBlockStorageClass, localBlockVolume } from "./local-block.ts";
import { parseLoopList } from "./loop-devices.ts";

const claim = (modes: string[], storage = "5Gi"): V1PersistentVolumeClaim => ({
  metadata: { name: "data", namespace: "vms", uid: "1234", resourceVersion: "7" },
  spec: { accessModes: modes, resources: { requests: { storage } }, volumeMode: "Block" },
});
const node = { metadata: { name: "node02", labels: { "kubernetes.io/hostname": "node02" } } };

describe("localBlockVolume()", () => {
  it("makes a Block claim's PV: a local volume at the device link, size, modes, class policy, claimRef, node", () => {
    const pv = localBlockVolume(claim(["ReadWriteOnce"]), localBlockStorageClass(), "/data/storage/local-block", node);
    expect(pv).toEqual({
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: {
        name: "pvc-1234",
        annotations: { "pv.kubernetes.io/provisioned-by": "kubevirt-ts.io/local-block" },
        labels: {},
      },
      spec: {
        capacity: { storage: "5Gi" },
        accessModes: ["ReadWriteOnce"],
        volumeMode: "Block",
        persistentVolumeReclaimPolicy: "Delete",
        storageClassName: "local-block",
        local: { path: "/data/storage/local-block/pvc-1234_vms_data" },
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

  it("gives a ReadWriteMany claim node affinity every node satisfies (a local PV must have one)", () => {
    const pv = localBlockVolume(claim(["ReadWriteMany"]), localBlockStorageClass(), "/s", node);
    expect(pv.spec?.nodeAffinity).toEqual({
      required: { nodeSelectorTerms: [{ matchExpressions: [{ key: "kubernetes.io/hostname", operator: "Exists" }] }] },
    });
  });

  it("keeps the backing file beside the link and sizes the device in whole sectors", () => {
    const link = deviceLinkFor("/s", claim(["ReadWriteOnce"]));
    expect(backingFileOf(link)).toBe("/s/pvc-1234_vms_data.img");
    expect(deviceBytes(claim(["ReadWriteOnce"], "64Mi"))).toBe(64n * 2n ** 20n);
    expect(deviceBytes(claim(["ReadWriteOnce"], "1k"))).toBe(1024n);
    expect(deviceBytes(claim(["ReadWriteOnce"], "1000"))).toBe(1024n);
  });

  it("is a WaitForFirstConsumer class with reclaim policy Delete, not the default", () => {
    expect(localBlockStorageClass()).toEqual({
      apiVersion: "storage.k8s.io/v1",
      kind: "StorageClass",
      metadata: { name: "local-block" },
      provisioner: "kubevirt-ts.io/local-block",
      reclaimPolicy: "Delete",
      volumeBindingMode: "WaitForFirstConsumer",
    });
  });
});

describe("parseLoopList()", () => {
  it("reads losetup's JSON: devices with a backing file, deleted files and auto-clear marked", () => {
    const text = JSON.stringify({
      loopdevices: [
        { name: "/dev/loop0", "back-file": "/s/a.img", autoclear: false },
        { name: "/dev/loop1", "back-file": "/s/b.img (deleted)", autoclear: true },
        { name: "/dev/loop2", "back-file": null, autoclear: false },
      ],
    });
    expect(parseLoopList(text)).toEqual([
      { device: "/dev/loop0", file: "/s/a.img", deleted: false, autoclear: false },
      { device: "/dev/loop1", file: "/s/b.img", deleted: true, autoclear: true },
    ]);
    expect(parseLoopList("")).toEqual([]);
  });
});
