/**
 * kill -9 of a virt-handler: the guests on its node keep running while it is down (same launcher process, the
 * console still advancing; read from the launcher's console file, as the launcher pod has no guest-console-log
 * container yet), the supervisor restarts it, and the new handler re-adopts them: the VMI stays Running
 * with its conditions, pause and unpause (virt-api -> handler -> launcher) work again, and a later stop works.
 */

import { eventually } from "@kvt/testing";
import { afterAll, describe, expect, inject, it } from "vitest";
import { kubectl, kubectlOk, virtctl } from "../lib/cli.ts";
import { CLUSTER_WAIT } from "../lib/cluster-wait.ts";
import { testGuestVm } from "../lib/manifests.ts";
import { launcherPods, type VmiView, vmiOrUndefined } from "../lib/objects.ts";
import { alive, consoleFile, guestProgress, handlerPid, launcherPid, watchVmi } from "../lib/processes.ts";

const NAME = "e2e-handler-kill";

/** The highest progress line number the test guest has printed on its console. */
function progress(kubeconfig: string, node: string, podUid: string): number {
  return guestProgress(consoleFile(kubeconfig, node, podUid));
}

function condition(vmi: VmiView | undefined, type: string): string | undefined {
  return vmi?.status?.conditions?.find((c) => c.type === type)?.status;
}

describe("kill -9 of a virt-handler", () => {
  const kubeconfig = inject("kubeconfig");

  afterAll(async () => {
    await kubectl(kubeconfig, ["delete", "vm", NAME, "--ignore-not-found", "--wait=false"]);
  });

  it("leaves the guest running, and the restarted handler re-adopts it", async () => {
    await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(testGuestVm(NAME, { running: true })));
    const vmi = await eventually(
      async () => {
        const v = await vmiOrUndefined(kubeconfig, NAME);
        expect(v?.status?.phase).toBe("Running");
        expect(condition(v, "Ready")).toBe("True");
        return v!;
      },
      { ...CLUSTER_WAIT, timeoutMs: 45_000, what: "the VMI to be Running and Ready" },
    );
    const uid = vmi.metadata.uid;
    const node = vmi.status!.nodeName!;
    const pod = (await launcherPods(kubeconfig, uid)).at(-1)!;
    const launcher = launcherPid(pod.metadata.uid);
    const handler = handlerPid(kubeconfig, node);
    expect(launcher).toBeDefined();
    expect(handler).toBeDefined();
    const before = await eventually(
      async () => {
        const n = progress(kubeconfig, node, pod.metadata.uid);
        expect(n).toBeGreaterThanOrEqual(0);
        return n;
      },
      { ...CLUSTER_WAIT, timeoutMs: 20_000, what: "the guest's first progress line" },
    );

    const watcher = watchVmi(kubeconfig, NAME);
    try {
      await eventually(
        () => {
          expect(watcher.seen.length).toBeGreaterThan(0);
          return true;
        },
        { ...CLUSTER_WAIT, timeoutMs: 10_000 },
      );
      process.kill(handler!, "SIGKILL");
      await eventually(
        () => {
          expect(alive(handler!)).toBe(false);
          return true;
        },
        { ...CLUSTER_WAIT, timeoutMs: 5_000, what: "the handler to die" },
      );

      // While the handler is down (or restarting), the guest runs on: same launcher, console still advancing.
      await eventually(
        async () => {
          expect(alive(launcher!)).toBe(true);
          expect(progress(kubeconfig, node, pod.metadata.uid)).toBeGreaterThan(before);
          return true;
        },
        { ...CLUSTER_WAIT, timeoutMs: 20_000, what: "the guest's console to advance during the handler outage" },
      );

      // The supervisor restarts the handler.
      const restarted = await eventually(
        () => {
          const pid = handlerPid(kubeconfig, node);
          expect(pid).toBeDefined();
          expect(pid).not.toBe(handler);
          return pid!;
        },
        { ...CLUSTER_WAIT, timeoutMs: 30_000, what: "the supervisor to restart the handler" },
      );

      // The new handler drives the guest it found: pause and unpause go virt-api -> handler -> launcher.
      await eventually(
        async () => {
          const r = await virtctl(kubeconfig, ["pause", "vmi", NAME]);
          expect(r.code, r.stderr).toBe(0);
          return true;
        },
        { ...CLUSTER_WAIT, timeoutMs: 30_000, intervalMs: 1000, what: "virtctl pause through the restarted handler" },
      );
      await eventually(
        async () => {
          expect(condition(await vmiOrUndefined(kubeconfig, NAME), "Paused")).toBe("True");
          return true;
        },
        { ...CLUSTER_WAIT, timeoutMs: 20_000, what: "the Paused condition" },
      );
      const unpause = await virtctl(kubeconfig, ["unpause", "vmi", NAME]);
      expect(unpause.code, unpause.stderr).toBe(0);
      const after = await eventually(
        async () => {
          const v = await vmiOrUndefined(kubeconfig, NAME);
          expect(condition(v, "Paused")).not.toBe("True");
          expect(condition(v, "Ready")).toBe("True");
          return v!;
        },
        { ...CLUSTER_WAIT, timeoutMs: 20_000, what: "the Paused condition to clear" },
      );
      expect(after.metadata.uid).toBe(uid);
      expect(after.status?.phase).toBe("Running");
      expect(after.status?.nodeName).toBe(node);
      expect(launcherPid(pod.metadata.uid)).toBe(launcher);
      expect(handlerPid(kubeconfig, node)).toBe(restarted);
      // The VMI never left Running: the outage and the re-adoption were invisible in its phase.
      expect(new Set(watcher.seen.filter((s) => s.uid === uid).map((s) => s.phase))).toEqual(new Set(["Running"]));
    } finally {
      watcher.stop();
    }

    // A later stop still works: the VMI goes away and its launcher ends.
    await kubectlOk(kubeconfig, ["patch", "vm", NAME, "--type", "merge", "-p", '{"spec":{"running":false}}']);
    await eventually(
      async () => {
        expect(await vmiOrUndefined(kubeconfig, NAME)).toBeUndefined();
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 30_000, what: "the VMI to go after stop" },
    );
    await eventually(
      () => {
        expect(alive(launcher!)).toBe(false);
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 10_000, what: "the launcher to end" },
    );
    await kubectlOk(kubeconfig, ["delete", "vm", NAME]);
  });
});
