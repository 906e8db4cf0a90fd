/**
 * VirtualMachineInstanceReplicaSet and VirtualMachinePool with the real kubectl: a replica set of two test-guest
 * VMIs runs two, `kubectl scale` to 3 runs three, to 1 removes two, a deleted VMI is replaced; a pool of two makes
 * VMs <pool>-0 and <pool>-1 whose VMIs run. Deleting either owner removes what it made.
 */

import { eventually } from "@kvt/testing";
import { afterAll, describe, expect, inject, it } from "vitest";
import { kubectl, kubectlOk } from "../lib/cli.ts";
import { CLUSTER_WAIT } from "../lib/cluster-wait.ts";
import { testGuestVm } from "../lib/manifests.ts";
import type { VmiView } from "../lib/objects.ts";

const RS = "e2e-rs";
const POOL = "e2e-pool";
const RS_LABEL = "kubevirt.io/vmReplicaSet";
const START_WAIT = { ...CLUSTER_WAIT, timeoutMs: 180_000 };

/** The VMI template of the test-guest VM, with `labels` added. */
function template(labels: Record<string, string>): Record<string, unknown> {
  const vm = testGuestVm("unused") as { spec: { template: { metadata: { labels: Record<string, string> } } } };
  const t = structuredClone(vm.spec.template);
  t.metadata.labels = labels;
  return t;
}

function replicaSet(replicas: number): Record<string, unknown> {
  return {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachineInstanceReplicaSet",
    metadata: { name: RS },
    spec: { replicas, selector: { matchLabels: { [RS_LABEL]: RS } }, template: template({ [RS_LABEL]: RS }) },
  };
}

function pool(replicas: number): Record<string, unknown> {
  return {
    apiVersion: "pool.kubevirt.io/v1beta1",
    kind: "VirtualMachinePool",
    metadata: { name: POOL },
    spec: {
      replicas,
      selector: { matchLabels: { "kubevirt.io/vmpool": POOL } },
      virtualMachineTemplate: {
        metadata: { labels: { "kubevirt.io/vmpool": POOL } },
        spec: { runStrategy: "Always", template: template({ "kubevirt.io/vmpool": POOL }) },
      },
    },
  };
}

async function vmisOf(kubeconfig: string, selector: string): Promise<VmiView[]> {
  const out = await kubectlOk(kubeconfig, ["get", "vmi", "-l", selector, "-o", "json"]);
  return (JSON.parse(out) as { items: VmiView[] }).items;
}

/** Waits until exactly `n` VMIs of the replica set exist and all are Running; returns them. */
function running(kubeconfig: string, n: number, what: string): Promise<VmiView[]> {
  return eventually(
    async () => {
      const vmis = await vmisOf(kubeconfig, `${RS_LABEL}=${RS}`);
      expect(vmis.map((v) => v.status?.phase)).toEqual(Array.from({ length: n }, () => "Running"));
      return vmis;
    },
    { ...START_WAIT, what },
  );
}

describe("VirtualMachineInstanceReplicaSet (kubectl)", () => {
  const kubeconfig = inject("kubeconfig");

  afterAll(async () => {
    await kubectl(kubeconfig, ["delete", "vmirs", RS, "--ignore-not-found", "--wait=false"]);
  });

  it("a replica set of 2 runs 2 VMIs it owns, and kubectl get shows Desired/Current/Ready", async () => {
    const out = await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(replicaSet(2)));
    expect(out.trim()).toBe(`virtualmachineinstancereplicaset.kubevirt.io/${RS} created`);
    const vmis = await running(kubeconfig, 2, "2 running VMIs");
    for (const v of vmis) {
      expect(v.metadata.name.startsWith(RS)).toBe(true);
      expect(v.metadata.ownerReferences?.[0]).toMatchObject({
        kind: "VirtualMachineInstanceReplicaSet",
        controller: true,
      });
    }
    await eventually(async () => {
      const table = await kubectlOk(kubeconfig, ["get", "vmirs", RS]);
      expect(table).toMatch(/^NAME\s+DESIRED\s+CURRENT\s+READY\s+AGE$/m);
      expect(table).toMatch(new RegExp(`^${RS}\\s+2\\s+2\\s+2\\s+\\S+$`, "m"));
      return true;
    }, START_WAIT);
    const selector = await kubectlOk(kubeconfig, ["get", "vmirs", RS, "-o", "jsonpath={.status.labelSelector}"]);
    expect(selector).toBe(`${RS_LABEL}=${RS}`);
  });

  it("kubectl scale --replicas 3 runs a third VMI", async () => {
    const out = await kubectlOk(kubeconfig, ["scale", "vmirs", RS, "--replicas", "3"]);
    expect(out.trim()).toBe(`virtualmachineinstancereplicaset.kubevirt.io/${RS} scaled`);
    await running(kubeconfig, 3, "3 running VMIs");
  });

  it("kubectl scale --replicas 1 removes two VMIs", async () => {
    await kubectlOk(kubeconfig, ["scale", "vmirs", RS, "--replicas", "1"]);
    await running(kubeconfig, 1, "1 running VMI");
    await eventually(async () => {
      const status = await kubectlOk(kubeconfig, ["get", "vmirs", RS, "-o", "jsonpath={.status.replicas}"]);
      expect(status).toBe("1");
      return true;
    }, START_WAIT);
  });

  it("a deleted VMI is replaced by a new one", async () => {
    const [before] = await vmisOf(kubeconfig, `${RS_LABEL}=${RS}`);
    await kubectlOk(kubeconfig, ["delete", "vmi", before.metadata.name, "--wait=false"]);
    await eventually(
      async () => {
        const vmis = await vmisOf(kubeconfig, `${RS_LABEL}=${RS}`);
        const fresh = vmis.filter((v) => v.metadata.uid !== before.metadata.uid);
        expect(fresh.map((v) => v.status?.phase)).toEqual(["Running"]);
        return true;
      },
      { ...START_WAIT, what: "a replacement VMI" },
    );
  });

  it("deleting the replica set removes its VMIs", async () => {
    await kubectlOk(kubeconfig, ["delete", "vmirs", RS]);
    await eventually(
      async () => {
        expect(await vmisOf(kubeconfig, `${RS_LABEL}=${RS}`)).toEqual([]);
        return true;
      },
      { ...START_WAIT, what: "the VMIs to go" },
    );
  });
});

describe("VirtualMachinePool (kubectl)", () => {
  const kubeconfig = inject("kubeconfig");

  afterAll(async () => {
    await kubectl(kubeconfig, ["delete", "vmpool", POOL, "--ignore-not-found", "--wait=false"]);
  });

  it("a pool of 2 makes VMs <pool>-0 and <pool>-1 whose VMIs run", async () => {
    const out = await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(pool(2)));
    expect(out.trim()).toBe(`virtualmachinepool.pool.kubevirt.io/${POOL} created`);
    await eventually(
      async () => {
        const names = await kubectlOk(kubeconfig, [
          "get",
          "vm",
          "-l",
          `kubevirt.io/vmpool=${POOL}`,
          "-o",
          "jsonpath={.items[*].metadata.name}",
        ]);
        expect(names.split(" ").sort()).toEqual([`${POOL}-0`, `${POOL}-1`]);
        const vmis = await vmisOf(kubeconfig, `kubevirt.io/vmpool=${POOL}`);
        expect(vmis.map((v) => [v.metadata.name, v.status?.phase]).sort()).toEqual([
          [`${POOL}-0`, "Running"],
          [`${POOL}-1`, "Running"],
        ]);
        return true;
      },
      { ...START_WAIT, what: "2 pool VMs running" },
    );
    await eventually(async () => {
      const table = await kubectlOk(kubeconfig, ["get", "vmpool", POOL]);
      expect(table).toMatch(new RegExp(`^${POOL}\\s+2\\s+2\\s+2\\s+\\S+$`, "m"));
      return true;
    }, START_WAIT);
  });

  it("kubectl scale vmpool --replicas 3 adds <pool>-2, --replicas 1 leaves one VM", async () => {
    const names = async (): Promise<string[]> =>
      (
        await kubectlOk(kubeconfig, [
          "get",
          "vm",
          "-l",
          `kubevirt.io/vmpool=${POOL}`,
          "-o",
          "jsonpath={.items[*].metadata.name}",
        ])
      )
        .split(" ")
        .filter((n) => n !== "")
        .sort();
    await kubectlOk(kubeconfig, ["scale", "vmpool", POOL, "--replicas", "3"]);
    await eventually(
      async () => {
        expect(await names()).toEqual([`${POOL}-0`, `${POOL}-1`, `${POOL}-2`]);
        return true;
      },
      { ...START_WAIT, what: "a third pool VM" },
    );
    await kubectlOk(kubeconfig, ["scale", "vmpool", POOL, "--replicas", "1"]);
    await eventually(
      async () => {
        expect(await names()).toHaveLength(1);
        const status = await kubectlOk(kubeconfig, ["get", "vmpool", POOL, "-o", "jsonpath={.status.replicas}"]);
        expect(status).toBe("1");
        return true;
      },
      { ...START_WAIT, what: "one pool VM left" },
    );
  });

  it("a changed VM template reaches the VM, and its VMI restarts from it", async () => {
    const patch = { spec: { virtualMachineTemplate: { spec: { template: { metadata: { labels: { tier: "b" } } } } } } };
    await kubectlOk(kubeconfig, ["patch", "vmpool", POOL, "--type", "merge", "-p", JSON.stringify(patch)]);
    await eventually(
      async () => {
        const vmis = await vmisOf(kubeconfig, `kubevirt.io/vmpool=${POOL}`);
        expect(vmis.map((v) => [v.metadata.labels?.tier, v.status?.phase])).toEqual([["b", "Running"]]);
        return true;
      },
      { ...START_WAIT, what: "the pool's VMI restarted with the new template" },
    );
  });

  it("deleting the pool removes its VMs", async () => {
    await kubectlOk(kubeconfig, ["delete", "vmpool", POOL]);
    await eventually(
      async () => {
        const names = await kubectlOk(kubeconfig, ["get", "vm", "-l", `kubevirt.io/vmpool=${POOL}`, "-o", "name"]);
        expect(names.trim()).toBe("");
        return true;
      },
      { ...START_WAIT, what: "the pool VMs to go" },
    );
  });
});
