import { eventually } from "@kvt/testing";
import { describe, expect, inject, it } from "vitest";
import { kubectlOk } from "../lib/cli.ts";
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

  it("serves the kubevirt.io API with KubeVirt's short names", async () => {
    const out = await kubectlOk(kubeconfig, ["api-resources", "--api-group=kubevirt.io"]);
    expect(out).toMatch(/^virtualmachines\s+vm,vms\s+kubevirt.io\/v1\s+true\s+VirtualMachine$/m);
    expect(out).toMatch(/^virtualmachineinstances\s+vmi,vmis\s+kubevirt.io\/v1\s+true\s+VirtualMachineInstance$/m);
  });
});
