import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import {
  DEFAULT_FAKE_NODE,
  fakeNode,
  fakeNodeNames,
  KWOK_DEFAULT_POD_CIDR,
  KWOK_STAGE_FILES,
  kwokArgs,
  renderKwokStages,
} from "./kwok.ts";

const stage = (name: string, kind = "Pod") =>
  `apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata:\n  name: ${name}\nspec:\n  resourceRef:\n    apiGroup: v1\n    kind: ${kind}\n`;

describe("renderKwokStages", () => {
  it("joins the Stage files into one YAML stream, each named by its path", () => {
    const text = renderKwokStages([
      { path: "node/a.yaml", text: stage("node-initialize", "Node") },
      { path: "pod/b.yaml", text: `---\n${stage("pod-ready")}` },
    ]);
    const docs = parseAllDocuments(text).map((d) => d.toJS() as { kind: string; metadata: { name: string } });
    expect(docs.map((d) => [d.kind, d.metadata.name])).toEqual([
      ["Stage", "node-initialize"],
      ["Stage", "pod-ready"],
    ]);
    expect(text).toContain("# node/a.yaml\n");
  });

  it("refuses a file that is not one kwok Stage", () => {
    expect(() => renderKwokStages([{ path: "x.yaml", text: "apiVersion: v1\nkind: ConfigMap\n" }])).toThrow(
      /x\.yaml is not a kwok Stage/,
    );
    expect(() => renderKwokStages([{ path: "y.yaml", text: `${stage("a")}---\n${stage("b")}` }])).toThrow(
      /y\.yaml holds more than one YAML document/,
    );
  });

  it("takes the node and pod Stages kwokctl's default cluster uses", () => {
    expect(KWOK_STAGE_FILES.filter((f) => f.includes("/node/"))).toHaveLength(2);
    expect(KWOK_STAGE_FILES.some((f) => f.endsWith("/pod-ready.yaml"))).toBe(true);
  });
});

describe("kwokArgs", () => {
  it("manages only annotated nodes, renews their leases and serves nothing", () => {
    const argv = kwokArgs({ binDir: "/b", kubeconfig: "/k" });
    expect(argv).toEqual([
      "/b/kwok",
      "--kubeconfig=/k",
      "--config=/b/kwok-stages.yaml",
      "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
      "--node-lease-duration-seconds=40",
      `--cidr=${KWOK_DEFAULT_POD_CIDR}`,
    ]);
    expect(argv.some((a) => a.startsWith("--server-address") || a.startsWith("--node-port"))).toBe(false);
    expect(kwokArgs({ binDir: "/b", kubeconfig: "/k", cidr: "10.9.0.0/16" }).at(-1)).toBe("--cidr=10.9.0.0/16");
  });
});

describe("fakeNodeNames and fakeNode", () => {
  it("names nodes so they sort", () => {
    expect(fakeNodeNames(2)).toEqual(["kwok-node-000", "kwok-node-001"]);
    expect(fakeNodeNames(1001).at(-1)).toBe("kwok-node-1000");
    expect(() => fakeNodeNames(0)).toThrow(RangeError);
    expect(() => fakeNodeNames(1.5)).toThrow(RangeError);
  });

  it("is a schedulable node kwok manages, with room for the launcher pods' devices", () => {
    const node = fakeNode("kwok-node-007");
    expect(node.metadata?.annotations?.["kwok.x-k8s.io/node"]).toBe("fake");
    expect(node.metadata?.labels?.["kubevirt.io/schedulable"]).toBe("true");
    expect(node.metadata?.labels?.["kubernetes.io/hostname"]).toBe("kwok-node-007");
    expect(node.spec?.taints).toBeUndefined();
    expect(node.status?.allocatable).toEqual(node.status?.capacity);
    expect(node.status?.capacity).toMatchObject({
      pods: String(DEFAULT_FAKE_NODE.pods),
      "devices.kubevirt.io/kvm": "1k",
    });
  });
});
