import { objectKey, type VirtualMachineInstance } from "@kvt/api";
import { CORE_V1, KUBEVIRT_V1, type Node, type Pod } from "@kvt/kube";
import {
  FakeApi,
  FakeRecorder,
  fakeStore,
  newNode,
  newPod,
  newVmi,
  reconcileWithGuard,
  withLabels,
  withPhase,
} from "@kvt/testing";
import { describe, expect, it } from "vitest";
import { NodeController } from "./node-controller.ts";

function setup(node: Node, vmis: VirtualMachineInstance[], pods: Pod[] = []) {
  const api = new FakeApi();
  api.seed(CORE_V1.nodes, node);
  for (const v of vmis) api.seed(KUBEVIRT_V1.virtualMachineInstances, v);
  const nodes = fakeStore([node]);
  const vmiStore = fakeStore(vmis);
  const podStore = fakeStore(pods);
  const recorder = new FakeRecorder();
  const controller = new NodeController({
    nodes,
    vmisOnNode: (n) => vmiStore.list().filter((v) => v.status?.nodeName === n),
    podsOfVmi: (uid) => podStore.list().filter((p) => p.metadata?.labels?.["kubevirt.io/created-by"] === uid),
    nodeClient: api.client(CORE_V1.nodes),
    vmiClient: api.client(KUBEVIRT_V1.virtualMachineInstances),
    recorder,
  });
  const run = () =>
    reconcileWithGuard(controller, objectKey(undefined, node.metadata!.name!), [nodes, vmiStore, podStore]);
  return { api, recorder, run };
}

const stale = (n: Node): void => {
  n.metadata!.annotations = { "kubevirt.io/heartbeat": new Date(Date.now() - 6 * 60_000).toISOString() };
};

describe("NodeController", () => {
  it("leaves a node with a fresh heartbeat alone and looks again before it would expire", async () => {
    const { api, run } = setup(newNode("n1"), [newVmi("a", withPhase("Running", "n1"))]);
    const r = await run();
    expect(api.summary()).toEqual([]);
    expect(r.requeueAfterMs).toBeGreaterThan(4 * 60_000);
  });

  it("marks a node with a stale heartbeat unschedulable and fails its VMIs without a live launcher pod", async () => {
    const withPod = newVmi("b", withPhase("Running", "n1"));
    const pod = newPod("virt-launcher-b", withLabels({ "kubevirt.io/created-by": withPod.metadata!.uid! }), (p) => {
      p.spec!.nodeName = "n1";
      p.status = { phase: "Running" };
    });
    const { api, recorder, run } = setup(
      newNode("n1", stale),
      [newVmi("a", withPhase("Running", "n1")), withPod],
      [pod],
    );
    await run();
    expect(api.stored<Node>(CORE_V1.nodes, undefined, "n1")?.metadata?.labels?.["kubevirt.io/schedulable"]).toBe(
      "false",
    );
    const a = api.stored<VirtualMachineInstance>(KUBEVIRT_V1.virtualMachineInstances, "default", "a");
    expect(a?.status).toMatchObject({ phase: "Failed", reason: "NodeUnresponsive" });
    expect(api.stored<VirtualMachineInstance>(KUBEVIRT_V1.virtualMachineInstances, "default", "b")?.status?.phase).toBe(
      "Running",
    );
    expect(recorder.reasons()).toEqual(["NodeUnresponsive"]);
  });
});
