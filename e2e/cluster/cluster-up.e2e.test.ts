import { existsSync } from "node:fs";
import { eventually } from "@kvt/testing";
import { describe, expect, inject, it } from "vitest";
import { getJson, kubectlOk } from "../lib/cli.ts";
import { CLUSTER_WAIT } from "../lib/cluster-wait.ts";

describe("the local cluster", () => {
  const kubeconfig = inject("kubeconfig");

  it("has two Ready nodes named like real nodes", async () => {
    const out = await eventually(async () => {
      const text = await kubectlOk(kubeconfig, ["get", "nodes"]);
      expect(text).toMatch(/^node01\s+Ready\s/m);
      expect(text).toMatch(/^node02\s+Ready\s/m);
      return text;
    }, CLUSTER_WAIT);
    expect(out.split("\n")[0]).toMatch(/^NAME\s+STATUS\s+ROLES\s+AGE\s+VERSION/);
  });

  it("advertises virt-handler's device plugins through each kubelet (1000 each, stored as 1k as kube-apiserver stores it; usable where the host has the node)", async () => {
    type Nodes = {
      items: { metadata: { labels: Record<string, string> }; status: Record<string, Record<string, string>> }[];
    };
    const devices = { kvm: "/dev/kvm", tun: "/dev/net/tun", "vhost-net": "/dev/vhost-net" };
    const nodes = await eventually(async () => {
      const list = await getJson<Nodes>(kubeconfig, "nodes");
      for (const n of list.items)
        for (const d of Object.keys(devices)) expect(n.status.capacity?.[`devices.kubevirt.io/${d}`]).toBe("1k");
      return list;
    }, CLUSTER_WAIT);
    for (const n of nodes.items) {
      expect(n.metadata.labels["kubevirt.io/schedulable"]).toBe("true");
      for (const [d, path] of Object.entries(devices))
        expect(n.status.allocatable?.[`devices.kubevirt.io/${d}`], d).toBe(existsSync(path) ? "1k" : "0");
    }
  });

  it("serves the kubevirt.io API with KubeVirt's short names", async () => {
    const out = await kubectlOk(kubeconfig, ["api-resources", "--api-group=kubevirt.io"]);
    expect(out).toMatch(/^virtualmachines\s+vm,vms\s+kubevirt.io\/v1\s+true\s+VirtualMachine$/m);
    expect(out).toMatch(/^virtualmachineinstances\s+vmi,vmis\s+kubevirt.io\/v1\s+true\s+VirtualMachineInstance$/m);
  });
});
