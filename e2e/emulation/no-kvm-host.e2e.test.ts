/**
 * A host without /dev/kvm, as a new user's laptop or these CI machines may be: a second local cluster whose every
 * component runs in a mount namespace without the kvm device node (startLocalCluster `hideKvm`, so the test runs the
 * same on hosts that have KVM). The nodes advertise no `devices.kubevirt.io/kvm`; with emulation allowed (the local
 * cluster's KubeVirt CR default) the seed's vm-cirros flow runs on QEMU with the SoftwareEmulation condition; with
 * `useEmulation: false` a VMI's launcher pod requests KVM and the VMI waits in Scheduling with the pod's
 * Unschedulable reason, as on KubeVirt.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { registerTestGuest } from "@kvt/images";
import { type LocalCluster, startLocalCluster } from "@kvt/local-cluster";
import { eventually } from "@kvt/testing";
import { testGuestPath } from "@kvt/vmm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { getJson, kubectl, kubectlOk } from "../lib/cli.ts";
import { CLUSTER_WAIT } from "../lib/cluster-wait.ts";
import { testGuestVm } from "../lib/manifests.ts";
import { vmiOrUndefined } from "../lib/objects.ts";
import { describeSeedVmFlow } from "../lib/seed-flow.ts";

const root = new URL("../../", import.meta.url).pathname;
let cluster: LocalCluster | undefined;
let dataDir = "";

beforeAll(async () => {
  registerTestGuest(testGuestPath());
  dataDir = mkdtempSync(join(tmpdir(), "kvt-e2e-nokvm-"));
  cluster = await startLocalCluster({
    projectRoot: root,
    dataDir,
    nodes: 2,
    hideKvm: true,
    progress: (m) => process.stdout.write(`[e2e no-kvm cluster] ${m}\n`),
  });
}, 300_000);

afterAll(async () => {
  await cluster?.stop();
  if (dataDir && !process.env.KVT_E2E_KEEP) rmSync(dataDir, { recursive: true, force: true });
}, 60_000);

const kubeconfig = (): string => {
  if (!cluster) throw new Error("the no-KVM cluster did not start");
  return cluster.kubeconfig;
};

describe("a host without /dev/kvm", () => {
  it("its nodes advertise no KVM device, and the cluster's KubeVirt CR allows emulation", async () => {
    // Eventually: each virt-handler's device plugin registers with its kubelet after the node is up, and the
    // node's allocatable shows the resource (0 devices) on the kubelet's next status update.
    await eventually(
      async () => {
        const nodes = await getJson<{ items: { status: { allocatable: Record<string, string> } }[] }>(
          kubeconfig(),
          "nodes",
        );
        expect(nodes.items).toHaveLength(2);
        for (const n of nodes.items) expect(n.status.allocatable["devices.kubevirt.io/kvm"]).toBe("0");
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 60_000, what: "both nodes to advertise 0 KVM devices" },
    );
    const kv = await kubectlOk(kubeconfig(), [
      "get",
      "kv",
      "kubevirt",
      "-n",
      "kubevirt",
      "-o",
      "jsonpath={.spec.configuration.developerConfiguration.useEmulation}",
    ]);
    expect(kv).toBe("true");
  });
});

describeSeedVmFlow("the seed's vm-cirros on a host without /dev/kvm (emulated)", kubeconfig, true);

describe("a host without /dev/kvm, emulation not allowed", () => {
  const patch = (useEmulation: boolean): Promise<string> =>
    kubectlOk(kubeconfig(), [
      "patch",
      "kv",
      "kubevirt",
      "-n",
      "kubevirt",
      "--type",
      "merge",
      "-p",
      JSON.stringify({ spec: { configuration: { developerConfiguration: { useEmulation } } } }),
    ]);

  afterAll(async () => {
    await kubectl(kubeconfig(), ["delete", "vm", "vm-needs-kvm", "--ignore-not-found", "--wait=false"]);
    await patch(true);
  });

  it("the VMI waits in Scheduling: its pod requests KVM and no node has it (KubeVirt's Unschedulable reason)", async () => {
    await patch(false);
    const manifest = testGuestVm("vm-needs-kvm", { running: true });
    await kubectlOk(kubeconfig(), ["create", "-f", "-"], stringify(manifest));
    const vmi = await eventually(
      async () => {
        const v = await vmiOrUndefined(kubeconfig(), "vm-needs-kvm");
        const scheduled = v?.status?.conditions?.find((c) => c.type === "PodScheduled");
        expect(scheduled).toMatchObject({ status: "False", reason: "Unschedulable" });
        return v!;
      },
      { ...CLUSTER_WAIT, timeoutMs: 60_000 },
    );
    expect(vmi.status?.phase).toBe("Scheduling");
    expect(vmi.status?.conditions?.find((c) => c.type === "PodScheduled")?.message).toMatch(
      /0\/2 nodes are available: 2 Insufficient devices\.kubevirt\.io\/kvm/,
    );
  });
});
