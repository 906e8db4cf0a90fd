/**
 * kill -9 of a process-kubelet while its node runs a VM: the supervisor restarts it and the new kubelet adopts the
 * running launcher (the same process, one guest) instead of starting a second launcher for the pod; stopping the VM
 * then ends the launcher and its guest, and the pod's directory and launcher socket go with the pod.
 * (Before the kubelet recorded its containers, the restarted kubelet started a second launcher, the node ran two
 * guests of the VMI, and the stop left the first launcher and its guest running.)
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { eventually } from "@kvt/testing";
import { afterAll, describe, expect, inject, it } from "vitest";
import { componentPids, launchersAndGuests } from "../lib/chaos.ts";
import { kubectl, kubectlOk } from "../lib/cli.ts";
import { CLUSTER_WAIT } from "../lib/cluster-wait.ts";
import { testGuestVm } from "../lib/manifests.ts";
import { launcherPods, vmiOrUndefined } from "../lib/objects.ts";
import { alive } from "../lib/processes.ts";

const NAME = "e2e-kubelet-kill";

describe("kill -9 of a process-kubelet", () => {
  const kubeconfig = inject("kubeconfig");
  const dataDir = kubeconfig.slice(0, kubeconfig.lastIndexOf("/"));

  afterAll(async () => {
    await kubectl(kubeconfig, ["delete", "vm", NAME, "--ignore-not-found", "--wait=false"]);
  });

  it("adopts the running launcher: one guest, and a stop ends it and removes the pod's files", async () => {
    await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(testGuestVm(NAME, { running: true })));
    const vmi = await eventually(
      async () => {
        const v = await vmiOrUndefined(kubeconfig, NAME);
        expect(v?.status?.phase).toBe("Running");
        return v!;
      },
      { ...CLUSTER_WAIT, timeoutMs: 45_000, what: "the VMI to run" },
    );
    const uid = vmi.metadata.uid;
    const node = vmi.status!.nodeName!;
    const pod = (await launcherPods(kubeconfig, uid)).at(-1)!;
    const guestsOf = () => launchersAndGuests(dataDir).guests.filter((g) => g.vmiUid === uid);
    const launchersOf = () => launchersAndGuests(dataDir).launchers.filter((l) => l.vmiUid === uid);
    const [guest] = await eventually(
      () => {
        const gs = guestsOf();
        expect(gs).toHaveLength(1);
        return gs;
      },
      { ...CLUSTER_WAIT, timeoutMs: 20_000, what: "one guest" },
    );
    expect(launchersOf()).toHaveLength(1);
    // The kubelet of the VMI's node: its --data-dir is <dataDir>/nodes/<node>.
    const kubeletOfNode = (): number | undefined =>
      componentPids(dataDir, "process-kubelet").find((pid) => cmdline(pid).includes(join(dataDir, "nodes", node)));
    const kubeletPid = kubeletOfNode();
    expect(kubeletPid).toBeDefined();
    process.kill(kubeletPid!, "SIGKILL");
    await eventually(
      () => {
        const again = kubeletOfNode();
        expect(again).toBeDefined();
        expect(again).not.toBe(kubeletPid);
        return again!;
      },
      { ...CLUSTER_WAIT, timeoutMs: 30_000, what: "the supervisor to restart the kubelet" },
    );
    // Give the restarted kubelet the time it took the old one to start a second launcher, then count.
    const settle = Date.now() + 8_000;
    while (Date.now() < settle) {
      expect(launchersOf().map((l) => l.pid)).toEqual([guest.launcherPid]);
      expect(guestsOf().map((g) => g.pid)).toEqual([guest.pid]);
      await new Promise((r) => setTimeout(r, 500));
    }
    expect((await vmiOrUndefined(kubeconfig, NAME))?.status?.phase).toBe("Running");

    await kubectlOk(kubeconfig, ["patch", "vm", NAME, "--type", "merge", "-p", '{"spec":{"running":false}}']);
    await eventually(
      async () => {
        expect(await vmiOrUndefined(kubeconfig, NAME)).toBeUndefined();
        expect(alive(guest.launcherPid)).toBe(false);
        expect(alive(guest.pid)).toBe(false);
        expect(launchersOf()).toEqual([]);
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 45_000, what: "the VMI, its launcher and its guest to end" },
    );
    const podDir = join(dataDir, "nodes", node, "pods", pod.metadata.uid);
    // The launcher's socket is in its pod's sockets emptyDir, so it goes with the pod's directory.
    const socket = join(podDir, "volumes", "kubernetes.io~empty-dir", "sockets", "launcher-sock");
    await eventually(
      () => {
        expect(existsSync(podDir), podDir).toBe(false);
        expect(existsSync(socket), socket).toBe(false);
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 30_000, what: "the pod's directory and socket to go" },
    );
  });
});

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
  } catch {
    return "";
  }
}
