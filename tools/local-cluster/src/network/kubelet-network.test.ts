import { describe, expect, it } from "vitest";
import type { V1Pod } from "../cluster/kube-models.ts";
import { planContainer, type RuntimeLayout } from "../kubelet/container-spec.ts";
import { planPodNetwork } from "./cluster-network.ts";
import { hostPorts, KubeletNetwork } from "./kubelet-network.ts";

const layout: RuntimeLayout = { projectRoot: "/p", execPath: "/bin/node", execArgs: [] };
const pod = (extra: Partial<V1Pod["spec"]> = {}): V1Pod => ({
  metadata: { name: "virt-launcher-a", namespace: "default", uid: "u1" },
  spec: {
    nodeName: "node01",
    containers: [
      {
        name: "compute",
        image: "virt-launcher",
        command: ["/usr/bin/virt-launcher"],
        env: [
          { name: "MY_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
          { name: "POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
        ],
        ports: [{ containerPort: 22, hostPort: 2222 }, { containerPort: 80 }],
      },
    ],
    ...extra,
  },
});

describe("KubeletNetwork (no sandbox wired: pure parts)", () => {
  const network = new KubeletNetwork(planPodNetwork("/d", ["node01"], []), "node01");

  it("leaves a pod without a sandbox on the node's network", () => {
    const p = pod();
    const plan = network.plan(p, p.spec!.containers[0], (q, c) => planContainer(q, c, "/pods/u1", layout));
    expect(plan.kind === "process" && plan.argv[0]).toBe("/bin/node");
    expect(plan.kind === "process" && plan.env.MY_IP).toBe("127.0.0.1");
    // POD_IP tells the launcher it runs in its pod's network namespace: not so without a sandbox.
    expect(plan.kind === "process" && "POD_IP" in plan.env).toBe(false);
    expect(network.podIPs("u1")).toBeUndefined();
  });

  it("does not wire a hostNetwork pod", async () => {
    await network.attach(pod({ hostNetwork: true })); // would need root and the plugins if it tried
    expect(network.podIPs("u1")).toBeUndefined();
  });

  it("maps hostPorts to portmap's runtime config", () => {
    expect(hostPorts(pod())).toEqual([{ hostPort: 2222, containerPort: 22, protocol: "tcp" }]);
  });

  it("refuses a node without a range in the plan", () => {
    expect(() => new KubeletNetwork(planPodNetwork("/d", ["node01"], []), "node09")).toThrow(/node09/);
  });
});
