/**
 * kill -9 of a virt-launcher: the guest is gone, so its VMI goes Failed; a VM with runStrategy Always then gets a
 * new VMI that reaches Running (KubeVirt's "should be rescheduled / restarted" on launcher loss). Test-guest VMs on
 * the native VMM; the launcher process is found through its pod (the pod's directory is its working directory).
 */

import { eventually } from "@kvt/testing";
import { afterAll, describe, expect, inject, it } from "vitest";
import { kubectl, kubectlOk } from "../lib/cli.ts";
import { CLUSTER_WAIT } from "../lib/cluster-wait.ts";
import { testGuestVm } from "../lib/manifests.ts";
import { launcherPods, type VmiView, vmiOrUndefined } from "../lib/objects.ts";
import { alive, launcherPid, watchVmi } from "../lib/processes.ts";

const NAME = "e2e-launcher-kill";

async function runningVmi(kubeconfig: string, name: string, notUid?: string): Promise<VmiView> {
  return eventually(
    async () => {
      const v = await vmiOrUndefined(kubeconfig, name);
      expect(v?.metadata.uid).toBeDefined();
      if (notUid) expect(v?.metadata.uid).not.toBe(notUid);
      expect(v?.status?.phase).toBe("Running");
      return v!;
    },
    { ...CLUSTER_WAIT, timeoutMs: 45_000, what: `VMI ${name} to be Running` },
  );
}

/** The pid of the launcher of `vmi` (its newest launcher pod's process). */
async function launcherOf(kubeconfig: string, vmi: VmiView): Promise<number> {
  return eventually(
    async () => {
      const pod = (await launcherPods(kubeconfig, vmi.metadata.uid)).at(-1);
      expect(pod).toBeDefined();
      const pid = launcherPid(pod!.metadata.uid);
      expect(pid).toBeDefined();
      return pid!;
    },
    { ...CLUSTER_WAIT, timeoutMs: 10_000, what: `the launcher process of ${vmi.metadata.name}` },
  );
}

describe("kill -9 of a virt-launcher", () => {
  const kubeconfig = inject("kubeconfig");

  afterAll(async () => {
    await kubectl(kubeconfig, ["delete", "vm", NAME, "--ignore-not-found", "--wait=false"]);
    await kubectl(kubeconfig, ["delete", "vmi", `${NAME}-plain`, "--ignore-not-found", "--wait=false"]);
  });

  it("fails a plain VMI (phase Failed, launcher pod not Running)", async () => {
    const name = `${NAME}-plain`;
    const manifest = testGuestVm(name) as { spec: { template: { metadata: unknown; spec: unknown } } };
    const vmiManifest = {
      apiVersion: "kubevirt.io/v1",
      kind: "VirtualMachineInstance",
      metadata: { name },
      spec: manifest.spec.template.spec,
    };
    await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(vmiManifest));
    const vmi = await runningVmi(kubeconfig, name);
    const pid = await launcherOf(kubeconfig, vmi);
    process.kill(pid, "SIGKILL");
    await eventually(
      () => {
        expect(alive(pid)).toBe(false);
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 5_000, what: "the launcher to die" },
    );
    const failed = await eventually(
      async () => {
        const v = await vmiOrUndefined(kubeconfig, name);
        expect(v?.metadata.uid).toBe(vmi.metadata.uid);
        expect(v?.status?.phase).toBe("Failed");
        return v!;
      },
      { ...CLUSTER_WAIT, timeoutMs: 30_000, what: "the VMI to go Failed" },
    );
    expect(failed.status?.nodeName).toBe(vmi.status?.nodeName);
    await kubectlOk(kubeconfig, ["delete", "vmi", name]);
    await eventually(
      async () => {
        expect(await vmiOrUndefined(kubeconfig, name)).toBeUndefined();
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 30_000, what: "the failed VMI to be deleted" },
    );
  });

  it("fails the VMI of an Always VM, which then gets a new VMI that reaches Running", async () => {
    await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(testGuestVm(NAME, { runStrategy: "Always" })));
    const first = await runningVmi(kubeconfig, NAME);
    const pid = await launcherOf(kubeconfig, first);
    const watcher = watchVmi(kubeconfig, NAME);
    try {
      // The watch prints the current state first: only kill once it follows the VMI.
      await eventually(
        () => {
          expect(watcher.seen.some((s) => s.uid === first.metadata.uid)).toBe(true);
          return true;
        },
        { ...CLUSTER_WAIT, timeoutMs: 10_000, what: "kubectl get -w to print the VMI" },
      );
      process.kill(pid, "SIGKILL");
      const second = await runningVmi(kubeconfig, NAME, first.metadata.uid);
      // The old VMI was seen Failed before the VM controller replaced it.
      expect(watcher.seen).toContainEqual({ uid: first.metadata.uid, phase: "Failed" });
      expect(watcher.seen.filter((s) => s.uid === first.metadata.uid).map((s) => s.phase)).not.toContain("Succeeded");
      // A new launcher (a new process) runs the new VMI.
      const newPid = await launcherOf(kubeconfig, second);
      expect(newPid).not.toBe(pid);
      expect(alive(pid)).toBe(false);
    } finally {
      watcher.stop();
    }
    await kubectlOk(kubeconfig, ["delete", "vm", NAME]);
    await eventually(
      async () => {
        expect(await vmiOrUndefined(kubeconfig, NAME)).toBeUndefined();
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 30_000, what: "the VMI to be deleted with its VM" },
    );
  });
});
