import { describe, expect, it } from "vitest";
import type { V1Node, V1Pod } from "../cluster/kube-models.ts";
import { indexByNode } from "./predicates.ts";
import { schedulePod } from "./schedule.ts";

// A test-only parser for the plain quantities used below ("2", "500m", "4Gi", "1k").
const parse = (q: string): number => {
  const m = /^(\d+)(m|Ki|Mi|Gi|k)?$/.exec(q);
  if (!m) throw new Error(`bad quantity ${q}`);
  const mult: Record<string, number> = { m: 0.001, Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, k: 1000 };
  return Number(m[1]) * (m[2] ? mult[m[2]] : 1);
};

function node(
  name: string,
  extra: Partial<V1Node["spec"]> = {},
  labels: Record<string, string> = {},
  kvm = "1k",
): V1Node {
  return {
    metadata: { name, labels: { "kubernetes.io/hostname": name, ...labels } },
    spec: { ...extra },
    status: { allocatable: { cpu: "2", memory: "4Gi", pods: "110", "devices.kubevirt.io/kvm": kvm } },
  };
}

function pod(
  name: string,
  spec: Partial<V1Pod["spec"]> = {},
  labels: Record<string, string> = {},
  nodeName?: string,
): V1Pod {
  return {
    metadata: { name, namespace: "default", uid: name, labels },
    spec: {
      nodeName,
      containers: [
        {
          name: "compute",
          resources: { requests: { cpu: "100m", memory: "1Gi" }, limits: { "devices.kubevirt.io/kvm": "1" } },
        },
      ],
      ...spec,
    },
  };
}

describe("schedulePod()", () => {
  it("decides the same with the per-node index a scheduling pass builds", () => {
    // node01 is full of memory (4 x 1Gi), node02 has one pod, node03 none: the next pod goes to node03, then node02.
    const nodes = [node("node01"), node("node02"), node("node03")];
    const bound = [
      ...["a", "b", "c", "d"].map((n) => pod(n, {}, {}, "node01")),
      pod("e", {}, {}, "node02"),
      pod("f", {}, {}, undefined),
    ];
    const plain = { nodes, boundPods: bound };
    const indexed = { ...plain, podsByNode: indexByNode(bound) };
    expect(
      indexByNode(bound)
        .get("node01")
        ?.map((p) => p.metadata?.name),
    ).toEqual(["a", "b", "c", "d"]);
    expect(indexByNode(bound).has("")).toBe(false);
    for (const snapshot of [plain, indexed]) {
      expect(schedulePod(pod("x"), snapshot, parse)).toEqual({ nodeName: "node03" });
      expect(schedulePod(pod("x"), { ...snapshot, nodes: nodes.slice(0, 1) }, parse)).toEqual({
        unschedulable: "0/1 nodes are available: 1 Insufficient memory.",
      });
    }
  });

  it("picks the node with fewer pods, then by name", () => {
    const nodes = [node("node02"), node("node01")];
    expect(schedulePod(pod("a"), { nodes, boundPods: [] }, parse)).toEqual({ nodeName: "node01" });
    expect(schedulePod(pod("b"), { nodes, boundPods: [pod("a", {}, {}, "node01")] }, parse)).toEqual({
      nodeName: "node02",
    });
  });

  it("honours the hostname anti-affinity a migration target pod carries", () => {
    const source = pod("virt-launcher-src", {}, { "kubevirt.io/created-by": "vmi-uid" }, "node01");
    const target = pod("virt-launcher-tgt", {
      affinity: {
        podAntiAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: [
            {
              topologyKey: "kubernetes.io/hostname",
              labelSelector: { matchLabels: { "kubevirt.io/created-by": "vmi-uid" } },
            },
          ],
        },
      },
    });
    const nodes = [node("node01"), node("node02")];
    expect(
      schedulePod(
        target,
        { nodes, boundPods: [source, pod("x", {}, {}, "node02"), pod("y", {}, {}, "node02")] },
        parse,
      ),
    ).toEqual({
      nodeName: "node02",
    });
    expect(schedulePod(target, { nodes: [node("node01")], boundPods: [source] }, parse)).toEqual({
      unschedulable: "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules.",
    });
  });

  it.each([
    ["nodeSelector", pod("p", { nodeSelector: { zone: "b" } }), "1 node(s) didn't match Pod's node affinity/selector"],
    [
      "required node affinity (NotIn)",
      pod("p", {
        affinity: {
          nodeAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: {
              nodeSelectorTerms: [{ matchExpressions: [{ key: "zone", operator: "NotIn", values: ["a"] }] }],
            },
          },
        },
      }),
      "1 node(s) didn't match Pod's node affinity/selector",
    ],
    [
      "too much memory",
      pod("p", { containers: [{ name: "c", resources: { requests: { memory: "5Gi" } } }] }),
      "1 Insufficient memory",
    ],
    [
      "every resource it lacks (NodeResourcesFit)",
      pod("p", {
        containers: [
          {
            name: "c",
            resources: { limits: { "devices.kubevirt.io/vhost-net": "1", "devices.kubevirt.io/tun": "1" } },
          },
          { name: "d", resources: { requests: { memory: "5Gi", cpu: "100m" } } },
        ],
      }),
      "1 Insufficient devices.kubevirt.io/tun, 1 Insufficient devices.kubevirt.io/vhost-net, 1 Insufficient memory",
    ],
  ])("explains %s", (_name, p, reason) => {
    const result = schedulePod(p, { nodes: [node("node01", {}, { zone: "a" })], boundPods: [] }, parse);
    expect(result).toEqual({ unschedulable: `0/1 nodes are available: ${reason}.` });
  });

  it("counts kvm devices, taints and cordons per node", () => {
    const nodes = [
      node("node01", { taints: [{ key: "dedicated", value: "gpu", effect: "NoSchedule" }] }),
      node("node02", { unschedulable: true }),
      node("node03", {}, {}, "0"),
    ];
    expect(schedulePod(pod("p"), { nodes, boundPods: [] }, parse)).toEqual({
      unschedulable:
        "0/3 nodes are available: 1 Insufficient devices.kubevirt.io/kvm, 1 node(s) had untolerated taint {dedicated: gpu}, 1 node(s) were unschedulable.",
    });
    const tolerant = pod("q", {
      tolerations: [{ key: "dedicated", operator: "Equal", value: "gpu", effect: "NoSchedule" }],
    });
    expect(schedulePod(tolerant, { nodes, boundPods: [] }, parse)).toEqual({ nodeName: "node01" });
  });

  it("keeps pods off a cordoned node (spec.unschedulable and its taint) unless they tolerate the taint", () => {
    const cordoned = node("node01", {
      unschedulable: true,
      taints: [{ key: "node.kubernetes.io/unschedulable", effect: "NoSchedule" }],
    });
    expect(schedulePod(pod("p"), { nodes: [cordoned], boundPods: [] }, parse)).toEqual({
      unschedulable: "0/1 nodes are available: 1 node(s) were unschedulable.",
    });
    const tolerant = pod("q", {
      tolerations: [{ key: "node.kubernetes.io/unschedulable", operator: "Exists", effect: "NoSchedule" }],
    });
    expect(schedulePod(tolerant, { nodes: [cordoned], boundPods: [] }, parse)).toEqual({ nodeName: "node01" });
    expect(schedulePod(pod("r"), { nodes: [node("node01")], boundPods: [] }, parse)).toEqual({ nodeName: "node01" });
  });
});
