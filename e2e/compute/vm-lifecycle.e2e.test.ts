/**
 * The seed's VirtualMachine flows with the real kubectl: create stopped, start and stop by patch, restart by
 * deleting the VMI (same firmware UUID), orphan delete with adoption, cascade delete. Test-guest VMs on the native VMM.
 */

import { eventually } from "@kvt/testing";
import { describe, expect, inject, it } from "vitest";
import { kubectl, kubectlOk } from "../lib/cli.ts";
import { CLUSTER_WAIT } from "../lib/cluster-wait.ts";
import { testGuestVm } from "../lib/manifests.ts";
import { launcherPods, vm, vmiOrUndefined } from "../lib/objects.ts";

const NAME = "e2e-lifecycle";

describe("VirtualMachine lifecycle (kubectl)", () => {
  const kubeconfig = inject("kubeconfig");
  let firmwareUuid: string | undefined;
  let firstVmiUid = "";

  it("kubectl create with running: false makes no VMI", async () => {
    const out = await kubectlOk(
      kubeconfig,
      ["create", "-f", "-"],
      JSON.stringify(testGuestVm(NAME, { running: false })),
    );
    expect(out.trim()).toBe(`virtualmachine.kubevirt.io/${NAME} created`);
    const r = await kubectl(kubeconfig, ["get", "vmis"]);
    expect(r.stdout + r.stderr).not.toContain(NAME);
    await eventually(async () => {
      expect((await vm(kubeconfig, NAME)).status?.printableStatus).toBe("Stopped");
      return true;
    }, CLUSTER_WAIT);
  });

  it("patching running: true starts a VMI that reaches Running on a node", async () => {
    await kubectlOk(kubeconfig, [
      "patch",
      "virtualmachine",
      NAME,
      "--type",
      "merge",
      "-p",
      '{"spec":{"running":true}}',
    ]);
    const vmi = await eventually(
      async () => {
        const v = await vmiOrUndefined(kubeconfig, NAME);
        expect(v?.status?.phase).toBe("Running");
        expect(v?.status?.nodeName).toMatch(/^node0[12]$/);
        return v!;
      },
      { ...CLUSTER_WAIT, timeoutMs: 120_000, what: "the VMI to be Running" },
    );
    firmwareUuid = vmi.spec.domain.firmware?.uuid;
    firstVmiUid = vmi.metadata.uid;
    expect(firmwareUuid).toMatch(/^[0-9a-f-]{36}$/);
    expect(vmi.metadata.ownerReferences?.[0]).toMatchObject({ kind: "VirtualMachine", controller: true });
    await eventually(async () => {
      const v = await vm(kubeconfig, NAME);
      expect(v.status).toMatchObject({ created: true, ready: true, printableStatus: "Running" });
      return true;
    }, CLUSTER_WAIT);
    const table = await kubectlOk(kubeconfig, ["get", "vmi", NAME]);
    expect(table).toMatch(new RegExp(`^${NAME}\\s+\\S+\\s+Running\\s+\\S*\\s*node0[12]\\s+True`, "m"));
    // Its launcher asked the node's kubelet for the tun device (the default pod interface), as KubeVirt's does.
    const [pod] = await launcherPods(kubeconfig, firstVmiUid);
    expect(pod?.spec.containers?.[0]?.resources?.limits?.["devices.kubevirt.io/tun"]).toBe("1");
  });

  it("deleting the VMI restarts it with the same firmware UUID", async () => {
    await kubectlOk(kubeconfig, ["delete", "virtualmachineinstance", NAME]);
    const vmi = await eventually(
      async () => {
        const v = await vmiOrUndefined(kubeconfig, NAME);
        expect(v?.metadata.uid).toBeDefined();
        expect(v?.metadata.uid).not.toBe(firstVmiUid);
        expect(v?.status?.phase).toBe("Running");
        return v!;
      },
      { ...CLUSTER_WAIT, timeoutMs: 120_000, what: "a new VMI" },
    );
    expect(vmi.spec.domain.firmware?.uuid).toBe(firmwareUuid);
  });

  it("kubectl delete vm --cascade=orphan leaves the VMI, and re-creating the VM adopts it", async () => {
    const before = await vmiOrUndefined(kubeconfig, NAME);
    await kubectlOk(kubeconfig, ["delete", "vm", NAME, "--cascade=orphan"]);
    await eventually(async () => {
      expect((await kubectl(kubeconfig, ["get", "vm", NAME])).code).not.toBe(0);
      return true;
    }, CLUSTER_WAIT);
    const orphan = await vmiOrUndefined(kubeconfig, NAME);
    expect(orphan?.metadata.uid).toBe(before?.metadata.uid);
    await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(testGuestVm(NAME, { running: true })));
    const newVm = await vm(kubeconfig, NAME);
    await eventually(async () => {
      const v = await vmiOrUndefined(kubeconfig, NAME);
      expect(v?.metadata.uid).toBe(before?.metadata.uid);
      expect(v?.metadata.ownerReferences?.[0]?.uid).toBe(newVm.metadata.uid);
      return true;
    }, CLUSTER_WAIT);
  });

  it("patching running: false stops it: the VMI goes away", async () => {
    await kubectlOk(kubeconfig, [
      "patch",
      "virtualmachine",
      NAME,
      "--type",
      "merge",
      "-p",
      '{"spec":{"running":false}}',
    ]);
    await eventually(
      async () => {
        expect(await vmiOrUndefined(kubeconfig, NAME)).toBeUndefined();
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 90_000, what: "the VMI to go" },
    );
    await eventually(async () => {
      expect((await vm(kubeconfig, NAME)).status?.printableStatus).toBe("Stopped");
      return true;
    }, CLUSTER_WAIT);
  });

  it("kubectl delete vm cascades to its VMI", async () => {
    await kubectlOk(kubeconfig, [
      "patch",
      "virtualmachine",
      NAME,
      "--type",
      "merge",
      "-p",
      '{"spec":{"running":true}}',
    ]);
    await eventually(
      async () => {
        expect((await vmiOrUndefined(kubeconfig, NAME))?.status?.phase).toBe("Running");
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 120_000 },
    );
    await kubectlOk(kubeconfig, ["delete", "vm", NAME]);
    await eventually(
      async () => {
        expect(await vmiOrUndefined(kubeconfig, NAME)).toBeUndefined();
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 90_000, what: "the VMI to be deleted" },
    );
  });
});
