import { describe, expect, it } from "vitest";
import type {
  V1Node,
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1Pod,
  V1StorageClass,
} from "../cluster/kube-models.ts";
import { schedulePod } from "./schedule.ts";
import type { VolumeSnapshot } from "./volume-binding.ts";

const parse = (q: string): number => Number.parseFloat(q) || 0;
const node = (name: string): V1Node => ({
  metadata: { name, labels: { "kubernetes.io/hostname": name } },
  status: { allocatable: { cpu: "2", memory: "4Gi", pods: "110" } },
});
const nodes = [node("node01"), node("node02")];
const pod = (claimName: string): V1Pod => ({
  metadata: { name: "p", namespace: "default", uid: "p" },
  spec: { containers: [{ name: "c" }], volumes: [{ name: "data", persistentVolumeClaim: { claimName } }] },
});
const classes: V1StorageClass[] = [
  { metadata: { name: "local-path" }, provisioner: "rancher.io/local-path", volumeBindingMode: "WaitForFirstConsumer" },
  {
    metadata: { name: "manual" },
    provisioner: "kubernetes.io/no-provisioner",
    volumeBindingMode: "WaitForFirstConsumer",
  },
  { metadata: { name: "fast" }, provisioner: "example.com/fast", volumeBindingMode: "Immediate" },
];
const claim = (name: string, cls: string, volumeName?: string): V1PersistentVolumeClaim => ({
  metadata: { name, namespace: "default" },
  spec: {
    accessModes: ["ReadWriteOnce"],
    resources: { requests: { storage: "1Gi" } },
    storageClassName: cls,
    volumeName,
  },
});
const pvOn = (name: string, nodeName: string): V1PersistentVolume => ({
  metadata: { name },
  spec: {
    capacity: { storage: "1Gi" },
    accessModes: ["ReadWriteOnce"],
    storageClassName: "manual",
    hostPath: { path: "/x" },
    nodeAffinity: {
      required: {
        nodeSelectorTerms: [
          { matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In", values: [nodeName] }] },
        ],
      },
    },
  },
  status: { phase: "Available" },
});
const snap = (claims: V1PersistentVolumeClaim[], volumes: V1PersistentVolume[] = []): VolumeSnapshot => ({
  claims,
  volumes,
  classes,
});

describe("schedulePod() with PersistentVolumeClaims", () => {
  it.each([
    ["a missing claim", snap([]), '0/2 nodes are available: persistentvolumeclaim "data" not found.'],
    [
      "an unbound Immediate claim",
      snap([claim("data", "fast")]),
      "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
    ],
    [
      "an unbound claim without a class",
      snap([claim("data", "")]),
      "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
    ],
    [
      "a delayed claim nothing can satisfy",
      snap([claim("data", "manual")]),
      "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind.",
    ],
  ])("keeps the pod Pending for %s", (_what, volumes, message) => {
    expect(schedulePod(pod("data"), { nodes, boundPods: [], volumes }, parse)).toEqual({ unschedulable: message });
  });

  it("schedules a pod with an unbound WaitForFirstConsumer claim and hands the claim to PreBind", () => {
    const c = claim("data", "local-path");
    expect(schedulePod(pod("data"), { nodes, boundPods: [], volumes: snap([c]) }, parse)).toEqual({
      nodeName: "node01",
      delayedClaims: [c],
    });
  });

  it("places a pod with a delayed claim where a static volume waits for it", () => {
    const volumes = snap([claim("data", "manual")], [pvOn("pv2", "node02")]);
    expect(schedulePod(pod("data"), { nodes, boundPods: [], volumes }, parse)).toMatchObject({ nodeName: "node02" });
  });

  it("places a pod whose RWO claim is bound to a node's volume on that node only", () => {
    const volumes = snap([claim("data", "local-path", "pv2")], [pvOn("pv2", "node02")]);
    expect(schedulePod(pod("data"), { nodes, boundPods: [], volumes }, parse)).toEqual({ nodeName: "node02" });
    expect(schedulePod(pod("data"), { nodes: [node("node01")], boundPods: [], volumes }, parse)).toEqual({
      unschedulable: "0/1 nodes are available: 1 node(s) had volume node affinity conflict.",
    });
  });
});
