import { describe, expect, it } from "vitest";
import type { V1Node, V1PersistentVolume, V1PersistentVolumeClaim } from "../cluster/kube-models.ts";
import { findMatchingVolume, requestedVolumeMismatch, volumeMismatch } from "./volume-match.ts";

const claim = (extra: Partial<V1PersistentVolumeClaim["spec"]> = {}): V1PersistentVolumeClaim => ({
  metadata: { name: "c", namespace: "ns", uid: "u1" },
  spec: {
    accessModes: ["ReadWriteOnce"],
    resources: { requests: { storage: "1Gi" } },
    storageClassName: "manual",
    ...extra,
  },
});
const volume = (name: string, size: string, extra: Partial<V1PersistentVolume["spec"]> = {}): V1PersistentVolume => ({
  metadata: { name, labels: { tier: "fast" } },
  spec: {
    capacity: { storage: size },
    accessModes: ["ReadWriteOnce", "ReadWriteMany"],
    storageClassName: "manual",
    hostPath: { path: `/v/${name}` },
    ...extra,
  },
  status: { phase: "Available" },
});
const node = (name: string): V1Node => ({ metadata: { name, labels: { "kubernetes.io/hostname": name } } });
const onNode = (n: string): Partial<V1PersistentVolume["spec"]> => ({
  nodeAffinity: {
    required: {
      nodeSelectorTerms: [{ matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In", values: [n] }] }],
    },
  },
});

describe("findMatchingVolume()", () => {
  it("takes the smallest volume that is big enough", () => {
    const vs = [volume("big", "10Gi"), volume("small", "512Mi"), volume("fit", "2Gi")];
    expect(findMatchingVolume(claim(), vs)?.metadata?.name).toBe("fit");
  });

  it("prefers a volume pre-bound to the claim", () => {
    const pre = volume("pre", "10Gi", { claimRef: { namespace: "ns", name: "c" } });
    expect(findMatchingVolume(claim(), [volume("fit", "2Gi"), pre])?.metadata?.name).toBe("pre");
  });

  it("honours the node when binding is delayed", () => {
    const vs = [volume("a", "1Gi", onNode("node01")), volume("b", "1Gi", onNode("node02"))];
    expect(findMatchingVolume(claim(), vs, node("node02"))?.metadata?.name).toBe("b");
  });

  it.each([
    ["storage class differs", volume("v", "1Gi", { storageClassName: "other" }), claim()],
    ["access modes not offered", volume("v", "1Gi", { accessModes: ["ReadOnlyMany"] }), claim()],
    ["capacity too small", volume("v", "1Mi"), claim()],
    ["volume mode differs", volume("v", "1Gi", { volumeMode: "Block" }), claim()],
    ["volume mode differs", volume("v", "1Gi", { volumeMode: "Filesystem" }), claim({ volumeMode: "Block" })],
    ["volume mode differs", volume("v", "1Gi"), claim({ volumeMode: "Block" })],
    ["volume is bound to another claim", volume("v", "1Gi", { claimRef: { namespace: "ns", name: "d" } }), claim()],
    ["selector does not match", volume("v", "1Gi"), claim({ selector: { matchLabels: { tier: "slow" } } })],
  ])("refuses a volume when the %s", (why, v, c) => {
    expect(volumeMismatch(v, c)).toBe(why);
    expect(findMatchingVolume(c, [v])).toBeUndefined();
  });
});

describe("requestedVolumeMismatch()", () => {
  it.each([
    ["incompatible volumeMode", volume("v", "1Gi", { volumeMode: "Block" }), claim({ volumeMode: "Filesystem" })],
    ["incompatible volumeMode", volume("v", "1Gi"), claim({ volumeMode: "Block" })],
    ["requested PV is too small", volume("v", "1Mi"), claim()],
    ["storageClassName does not match", volume("v", "1Gi", { storageClassName: "other" }), claim()],
    ["incompatible accessMode", volume("v", "1Gi", { accessModes: ["ReadOnlyMany"] }), claim()],
  ])("says %s, as kube-controller-manager's checkVolumeSatisfyClaim", (why, v, c) => {
    expect(requestedVolumeMismatch(v, c)).toBe(why);
  });

  it("accepts a Block volume for a Block claim", () => {
    expect(requestedVolumeMismatch(volume("v", "1Gi", { volumeMode: "Block" }), claim({ volumeMode: "Block" }))).toBe(
      undefined,
    );
  });
});
