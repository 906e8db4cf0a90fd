/**
 * `virtctl migrate-cancel` on a migration that is slow the way a KubeVirt user makes one slow: a MigrationPolicy
 * caps its bandwidth (bandwidthPerMigration 1Mi) while the test guest keeps dirtying its 16 MiB working set as fast
 * as it can, so the pre-copy cannot finish and the cancel lands mid-flight. The VMIM ends Failed with the abort
 * requested and succeeded, is then deleted (its finalizer released), and the guest never left the source: same VMI,
 * same node, progress lines continuing on the source launcher.
 */

import { eventually } from "@kvt/testing";
import { afterAll, describe, expect, inject, it } from "vitest";
import { getJson, kubectl, kubectlOk, kubectlWatch, virtctl } from "../lib/cli.ts";
import { CLUSTER_WAIT } from "../lib/cluster-wait.ts";
import { consoleLog, progressLines } from "../lib/console-log.ts";
import { testGuestVm } from "../lib/manifests.ts";
import { launcherPods, vmiOrUndefined } from "../lib/objects.ts";

const NAME = "e2e-migrate-cancel";
const POLICY = "e2e-slow-migrations";
const SLOW_LABEL = { "e2e.kubevirt-ts.io/migration": "slow" };

interface VmimView {
  metadata: { name: string; uid: string; generateName?: string; labels?: Record<string, string> };
  spec: { vmiName: string };
  status?: {
    phase?: string;
    conditions?: { type: string; status: string }[];
    migrationState?: { startTimestamp?: string; migrationConfiguration?: { bandwidthPerMigration?: string } };
  };
}

describe("virtctl migrate-cancel on a bandwidth-capped migration", () => {
  const kubeconfig = inject("kubeconfig");

  /** The VMIM's (phase, abort requested) as `kubectl get vmim -w` saw them, from the cancel to its deletion. */
  let watched: string[] = [];
  /** The VMIM's events, read after it was deleted. */
  let events = "";

  afterAll(async () => {
    await kubectl(kubeconfig, ["delete", "vm", NAME, "--ignore-not-found", "--wait=false"]);
    await kubectl(kubeconfig, ["delete", "migrationpolicy", POLICY, "--ignore-not-found"]);
  });

  it("cancels mid-flight: the abort succeeds, the VMIM goes, the guest keeps running on the source", async () => {
    const policy = {
      apiVersion: "migrations.kubevirt.io/v1alpha1",
      kind: "MigrationPolicy",
      metadata: { name: POLICY },
      spec: {
        selectors: { virtualMachineInstanceSelector: SLOW_LABEL },
        bandwidthPerMigration: "1Mi",
        // 64 MiB at 1 MiB/s cannot finish inside KubeVirt's default 150 s/GiB (9.4 s here): give it room.
        completionTimeoutPerGiB: 100_000,
      },
    };
    expect((await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(policy))).trim()).toBe(
      `migrationpolicy.migrations.kubevirt.io/${POLICY} created`,
    );
    await kubectlOk(
      kubeconfig,
      ["create", "-f", "-"],
      JSON.stringify(testGuestVm(NAME, { running: true, labels: SLOW_LABEL })),
    );
    const vmi = await eventually(
      async () => {
        const v = await vmiOrUndefined(kubeconfig, NAME);
        expect(v?.status?.phase).toBe("Running");
        expect(v?.status?.conditions?.find((c) => c.type === "LiveMigratable")?.status).toBe("True");
        return v!;
      },
      { ...CLUSTER_WAIT, timeoutMs: 150_000, intervalMs: 500, what: "a migratable running VMI" },
    );
    const sourceNode = vmi.status!.nodeName!;
    const sourcePod = (await launcherPods(kubeconfig, vmi.metadata.uid)).at(-1)!;
    await eventually(
      async () => {
        expect(progressLines(await consoleLog(kubeconfig, vmi.metadata.uid)).size).toBeGreaterThan(2);
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 60_000 },
    );

    // Nothing to cancel yet.
    const none = await virtctl(kubeconfig, ["migrate-cancel", NAME]);
    expect(none.code).toBe(1);
    expect(none.stderr.trim()).toBe(`Found no migration to cancel for ${NAME}`);

    const migrate = await virtctl(kubeconfig, ["migrate", NAME]);
    expect(migrate.code, migrate.stderr).toBe(0);
    expect(migrate.stdout).toBe(`VM ${NAME} was scheduled to migrate\n`);
    const vmim = await eventually(async () => {
      const list = await getJson<{ items: VmimView[] }>(kubeconfig, "vmim");
      const mine = list.items.filter((m) => m.spec.vmiName === NAME);
      expect(mine).toHaveLength(1);
      return mine[0];
    }, CLUSTER_WAIT);
    expect(vmim.metadata.name).toMatch(/^kubevirt-migrate-vm-/);
    expect(vmim.metadata.labels?.["kubevirt.io/vmi-name"]).toBe(NAME);

    // In flight: the source is sending (Running, startTimestamp), under the policy's cap.
    const inFlight = await eventually(
      async () => {
        const v = await vmiOrUndefined(kubeconfig, NAME);
        const ms = v?.status?.migrationState;
        expect(ms?.migrationUid).toBe(vmim.metadata.uid);
        expect(ms?.startTimestamp).toBeDefined();
        expect(ms?.completed).not.toBe(true);
        expect(ms?.failed).not.toBe(true);
        return ms!;
      },
      { ...CLUSTER_WAIT, timeoutMs: 150_000, intervalMs: 500, what: "the migration to be sending" },
    );
    expect(inFlight.migrationPolicyName).toBe(POLICY);
    const running = await getJson<VmimView>(kubeconfig, "vmim", vmim.metadata.name);
    expect(running.status?.phase).toBe("Running");
    expect(running.status?.migrationState?.migrationConfiguration?.bandwidthPerMigration).toBe("1Mi");
    // Still going a few seconds later: it is slow, not stuck before the hand-off.
    await new Promise((r) => setTimeout(r, 3000));
    expect((await getJson<VmimView>(kubeconfig, "vmim", vmim.metadata.name)).status?.phase).toBe("Running");

    const watch = kubectlWatch(kubeconfig, [
      "get",
      "vmim",
      vmim.metadata.name,
      "-w",
      "-o",
      'jsonpath={.status.phase}{" "}{.status.conditions[?(@.type=="migrationAbortRequested")].status}{"\\n"}',
    ]);
    const cancel = await virtctl(kubeconfig, ["migrate-cancel", NAME]);
    expect(cancel.code, cancel.stderr).toBe(0);
    expect(cancel.stdout).toBe(`VM ${NAME} was scheduled to migrate-cancel\n`);

    // The VMIM is held by its finalizer until it is Failed, then goes.
    await eventually(
      async () => {
        const r = await kubectl(kubeconfig, ["get", "vmim", vmim.metadata.name, "-o", "name"]);
        expect(r.code).not.toBe(0);
        expect(r.stderr).toMatch(/NotFound|not found/);
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 120_000, intervalMs: 500, what: "the canceled VMIM to be deleted" },
    );
    watched = (await watch.stop()).split("\n").filter((l) => l.trim() !== "");
    console.log(`[migrate-cancel] VMIM as watched (phase, abort requested): ${JSON.stringify([...new Set(watched)])}`);
    expect(watched).toContain("Running True");
    expect(watched).not.toContain("Succeeded True");

    // The source handler reports the abort's outcome on the VMI (it may land just after the VMIM went).
    const after = await eventually(
      async () => {
        const v = await vmiOrUndefined(kubeconfig, NAME);
        expect(v?.status?.migrationState).toMatchObject({
          migrationUid: vmim.metadata.uid,
          abortRequested: true,
          abortStatus: "Succeeded",
          failed: true,
          sourceNode,
        });
        return v!;
      },
      { ...CLUSTER_WAIT, timeoutMs: 60_000, what: "the VMI's migrationState to show the abort succeeded" },
    );
    const ms = after.status?.migrationState;
    expect(ms?.completed).not.toBe(true);
    expect(after.metadata.uid).toBe(vmi.metadata.uid);
    expect(after.status?.phase).toBe("Running");
    expect(after.status?.nodeName).toBe(sourceNode);
    // The target launcher has ended; the source launcher is the only one running, and its guest keeps counting.
    await eventually(
      async () => {
        expect(
          (await launcherPods(kubeconfig, vmi.metadata.uid))
            .filter((p) => p.status?.phase === "Running" || p.status?.phase === "Pending")
            .map((p) => p.metadata.name),
        ).toEqual([sourcePod.metadata.name]);
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 60_000 },
    );
    const last = Math.max(
      ...progressLines(await consoleLog(kubeconfig, vmi.metadata.uid, sourcePod.metadata.name)).keys(),
    );
    await eventually(
      async () => {
        expect(
          Math.max(...progressLines(await consoleLog(kubeconfig, vmi.metadata.uid, sourcePod.metadata.name)).keys()),
        ).toBeGreaterThan(last + 1);
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 60_000 },
    ).catch(async (error: unknown) => {
      // What the source launcher and its console said last: a guest that stopped and a console that stopped
      // copying look alike from here.
      const compute = await kubectl(kubeconfig, ["logs", sourcePod.metadata.name, "-c", "compute", "--tail=25"]);
      // guest-console-log (virt-tail) runs under KubeVirt's tiny limits (15m CPU, 60M): did it end or restart?
      const containers = await kubectl(kubeconfig, [
        "get",
        "pod",
        sourcePod.metadata.name,
        "-o",
        "jsonpath={.status.containerStatuses}",
      ]);
      const tail = (await consoleLog(kubeconfig, vmi.metadata.uid, sourcePod.metadata.name)).slice(-400);
      throw new Error(
        `${(error as Error).message}\nsource containers: ${containers.stdout}\nsource compute log:\n` +
          `${compute.stdout}${compute.stderr}\nconsole tail:\n${tail}`,
        { cause: error },
      );
    });
    events = await kubectlOk(kubeconfig, [
      "get",
      "events",
      "--field-selector",
      `involvedObject.name=${vmim.metadata.name}`,
      "-o",
      "custom-columns=REASON:.reason,MESSAGE:.message",
      "--no-headers",
    ]);
    console.log(`[migrate-cancel] VMIM events:\n${events}`);
    await kubectlOk(kubeconfig, ["delete", "vm", NAME]);
    await eventually(
      async () => {
        expect(await vmiOrUndefined(kubeconfig, NAME)).toBeUndefined();
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 90_000 },
    );
  });

  it("the canceled VMIM is Failed (FailedMigration) before its finalizer lets it go, as KubeVirt's", () => {
    // KubeVirt's migration controller writes phase Failed (and the FailedMigration event) first and releases the
    // finalizer on a later sync, so `kubectl get vmim -w` shows it Failed before the DELETED event.
    expect(watched).toContain("Failed True");
    expect(events).toMatch(/^FailedMigration\s/m);
  });
});
