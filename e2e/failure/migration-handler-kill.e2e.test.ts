/**
 * kill -9 of a virt-handler in the middle of a live migration never loses the guest (test guest, native VMM):
 *
 *   source handler  killed as soon as the source launcher starts sending. The launchers finish the move on their
 *                   own and the source launcher exits; the target's handler takes the VMI over (KubeVirt's target
 *                   ack of a completed migration), and the restarted source handler, finding no launcher, leaves
 *                   the VMI alone. Before, it failed the VMI (LauncherExited), the VM controller deleted it with the
 *                   target launcher holding the migrated guest, and the VM booted from scratch.
 *   target handler  killed at the same moment: the source's handler records the completion, the restarted target
 *                   handler re-adopts the launcher it finds running the guest. (A guard: this case held before too.)
 *   either handler  killed as soon as the target pod is scheduled, before or while the target is prepared: the
 *                   restarted source handler starts the move itself; the restarted target handler prepares its
 *                   launcher, or asks the prepared one again for the migration secret (guards as well).
 *   source handler + target launcher  killed during a bandwidth-capped migration that cannot finish: the
 *                   migration fails with a reason (the VMIM's and the source launcher's, read into the VMI by the
 *                   restarted handler) and the guest stays on the source: same VMI, still Running, still printing.
 *
 * Each kill-a-handler case: the VMIM Succeeded without a failure reason, the VMI kept its uid and never left Running, it runs on
 * the target node, and the guest's progress lines continue there from where they stopped on the source.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { eventually } from "@kvt/testing";
import { afterAll, describe, expect, inject, it } from "vitest";
import { getJson, kubectl, kubectlOk } from "../lib/cli.ts";
import { CLUSTER_WAIT } from "../lib/cluster-wait.ts";
import { testGuestVm } from "../lib/manifests.ts";
import { launcherPods, type PodView, vmiOrUndefined } from "../lib/objects.ts";
import { alive, consoleFile, guestProgress, handlerPid, launcherPid, watchVmi } from "../lib/processes.ts";

const NAME = "e2e-mig-handler-kill";

interface VmimView {
  status?: { phase?: string; migrationState?: { failureReason?: string } };
}

/** A file the launcher of `pod` writes in its pod directory ("" until it exists). */
function podFile(kubeconfig: string, pod: PodView, file: string): string {
  try {
    return readFileSync(
      join(dirname(kubeconfig), "nodes", pod.spec.nodeName ?? "", "pods", pod.metadata.uid, file),
      "utf8",
    );
  } catch {
    return "";
  }
}

/** Resolves once the launcher of `pod` logs that it started sending the guest (polled every 10 ms). */
async function migrationStarted(kubeconfig: string, pod: PodView, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!podFile(kubeconfig, pod, "compute.log").includes('"migration started"')) {
    if (Date.now() > deadline) throw new Error(`the source launcher did not start migrating within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** How many times the handler of `node` said it was ready (its log in the cluster's data directory). */
function handlerReadyCount(kubeconfig: string, node: string): number {
  try {
    const log = readFileSync(join(dirname(kubeconfig), "logs", `virt-handler-${node}.log`), "utf8");
    return log.split('"msg":"virt-handler ready"').length - 1;
  } catch {
    return 0;
  }
}

/** The source launcher's "migration ended" log line (its own account: ok, totalSeconds, downtimeMs). */
function migrationEnded(kubeconfig: string, pod: PodView): Record<string, unknown> | undefined {
  const line = podFile(kubeconfig, pod, "compute.log")
    .split("\n")
    .find((l) => l.includes('"migration ended"'));
  return line ? (JSON.parse(line) as Record<string, unknown>) : undefined;
}

/** When the handler is killed: as soon as the target pod is scheduled (before or while the target is prepared), or
 * as soon as the source launcher starts sending. */
type Moment = "preparing" | "sending";

async function migrateKillingHandler(
  kubeconfig: string,
  name: string,
  side: "source" | "target",
  at: Moment,
): Promise<void> {
  await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(testGuestVm(name, { running: true })));
  const vmi = await eventually(
    async () => {
      const v = await vmiOrUndefined(kubeconfig, name);
      expect(v?.status?.phase).toBe("Running");
      expect(v?.status?.conditions?.find((c) => c.type === "LiveMigratable")?.status).toBe("True");
      return v!;
    },
    { ...CLUSTER_WAIT, timeoutMs: 45_000, what: "a migratable running VMI" },
  );
  const uid = vmi.metadata.uid;
  const sourceNode = vmi.status!.nodeName!;
  const sourcePod = (await launcherPods(kubeconfig, uid)).at(-1)!;
  await eventually(
    () => {
      expect(guestProgress(consoleFile(kubeconfig, sourceNode, sourcePod.metadata.uid))).toBeGreaterThan(1);
      return true;
    },
    { ...CLUSTER_WAIT, timeoutMs: 20_000, what: "the guest's first progress lines" },
  );

  const watcher = watchVmi(kubeconfig, name);
  try {
    await kubectlOk(
      kubeconfig,
      ["create", "-f", "-"],
      JSON.stringify({
        apiVersion: "kubevirt.io/v1",
        kind: "VirtualMachineInstanceMigration",
        metadata: { name: `${name}-mig` },
        spec: { vmiName: name },
      }),
    );
    // The target node is known once the target pod is scheduled; its handler must be up to prepare the target.
    const targetNode = await eventually(
      async () => {
        const pod = (await launcherPods(kubeconfig, uid)).find(
          (p) => p.spec.nodeName && p.spec.nodeName !== sourceNode,
        );
        expect(pod).toBeDefined();
        return pod!.spec.nodeName!;
      },
      { ...CLUSTER_WAIT, timeoutMs: 30_000, what: "the target pod to be scheduled" },
    );
    const victimNode = side === "source" ? sourceNode : targetNode;
    const handler = handlerPid(kubeconfig, victimNode);
    expect(handler, `the ${side} handler's process`).toBeDefined();
    const readyBefore = handlerReadyCount(kubeconfig, victimNode);

    if (at === "sending") await migrationStarted(kubeconfig, sourcePod, 40_000);
    process.kill(handler!, "SIGKILL");
    const killedAt = Date.now();
    await eventually(
      () => {
        expect(alive(handler!)).toBe(false);
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 5_000, what: `the ${side} handler to die` },
    );

    // Usually a second or two; once, on a loaded host, the source launcher took ~35 s to answer `migrate` after a
    // target handler restart (its log went with its pod), so the wait is generous: it only costs when slow.
    const succeededAfterKillMs = await eventually(
      async () => {
        const m = await getJson<VmimView>(kubeconfig, "vmim", `${name}-mig`);
        expect(m.status?.migrationState?.failureReason).toBeUndefined();
        expect(m.status?.phase).toBe("Succeeded");
        return Date.now() - killedAt;
      },
      { ...CLUSTER_WAIT, timeoutMs: 90_000, what: "the migration to succeed" },
    );
    const moved = await vmiOrUndefined(kubeconfig, name);
    expect(moved?.metadata.uid).toBe(uid);
    expect(moved?.status?.phase).toBe("Running");
    expect(moved?.status?.nodeName).toBe(targetNode);
    expect(moved?.status?.migrationState).toMatchObject({ completed: true, sourceNode, targetNode });
    expect(moved?.status?.migrationState?.failed).toBeFalsy();
    await eventually(
      async () => {
        const v = await vmiOrUndefined(kubeconfig, name);
        expect(v?.metadata.labels?.["kubevirt.io/nodeName"]).toBe(targetNode);
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 20_000, what: "the kubevirt.io/nodeName label to follow the guest" },
    );

    // The guest continues on the target: the same sequence, nothing restarts at 0.
    const lastOnSource = guestProgress(consoleFile(kubeconfig, sourceNode, sourcePod.metadata.uid));
    const targetPod = (await launcherPods(kubeconfig, uid)).find((p) => p.spec.nodeName === targetNode)!;
    await eventually(
      () => {
        expect(guestProgress(consoleFile(kubeconfig, targetNode, targetPod.metadata.uid))).toBeGreaterThan(
          lastOnSource + 2,
        );
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 20_000, what: "the guest's progress to continue on the target" },
    );
    const onSource = consoleFile(kubeconfig, sourceNode, sourcePod.metadata.uid);
    const onTarget = consoleFile(kubeconfig, targetNode, targetPod.metadata.uid);
    const numbers = (text: string): number[] =>
      [...text.matchAll(/kvt-guest progress n=(\d+)/g)].map((m) => Number(m[1]));
    const first = Math.min(...numbers(onTarget));
    expect(first).toBeGreaterThan(0);
    // A line may be cut by the switch-over (its start printed on the source, its end on the target): the two logs
    // joined must hold every line from the source's last to the target's first, none lost, none repeated from 0.
    expect(first).toBeLessThanOrEqual(lastOnSource + 2);
    const joined = new Set(numbers(onSource + onTarget));
    for (let n = lastOnSource; n <= first; n++) expect(joined.has(n), `progress line ${n}`).toBe(true);

    // The restarted handler came back, and the VMI outlives its wait for a target report (60 s on the source side)
    // only if it was never failed: check the handler is back and the VMI is still Running on the target.
    await eventually(
      () => {
        const pid = handlerPid(kubeconfig, victimNode);
        expect(pid).toBeDefined();
        expect(pid).not.toBe(handler);
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 30_000, what: `the supervisor to restart the ${side} handler` },
    );
    await eventually(
      async () => {
        const v = await vmiOrUndefined(kubeconfig, name);
        expect(v?.status?.conditions?.find((c) => c.type === "Ready")?.status).toBe("True");
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 30_000, what: "the VMI to be Ready on the target" },
    );
    // The restarted handler re-adopts its launchers, syncs its cache, then reconciles its VMIs: before the fix, that
    // is when the source handler failed the VMI. Wait for it to be ready, give its first pass a moment, then look.
    await eventually(
      () => {
        expect(handlerReadyCount(kubeconfig, victimNode)).toBeGreaterThan(readyBefore);
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 60_000, what: `the restarted ${side} handler to be ready` },
    );
    await new Promise((r) => setTimeout(r, 2000));
    const still = await vmiOrUndefined(kubeconfig, name);
    expect(still?.metadata.uid).toBe(uid);
    expect(still?.status?.phase).toBe("Running");
    const ended = migrationEnded(kubeconfig, sourcePod);
    console.log(
      `[migration with the ${side} handler killed while ${at}] ${JSON.stringify({
        ok: ended?.ok,
        totalSeconds: ended?.totalSeconds,
        downtimeMs: ended?.downtimeMs,
        succeededAfterKillMs,
      })}`,
    );
    // One VMI from start to end, never Failed: the outage was invisible in its phase.
    expect(new Set(watcher.seen.map((s) => s.uid))).toEqual(new Set([uid]));
    expect(watcher.seen.map((s) => s.phase)).not.toContain("Failed");
  } finally {
    watcher.stop();
  }
  await kubectlOk(kubeconfig, ["delete", "vm", name, "--wait=false"]);
}

const CASES: [string, "source" | "target", Moment][] = [
  // The regression: before the target's handoff, the restarted source handler failed the migrated VMI.
  ["source-sending", "source", "sending"],
  ["target-sending", "target", "sending"],
  // The restarted source handler starts the move itself; the restarted target handler prepares (or asks its
  // prepared launcher again for the secret).
  ["source-preparing", "source", "preparing"],
  ["target-preparing", "target", "preparing"],
];

describe("kill -9 of a virt-handler during a live migration", () => {
  const kubeconfig = inject("kubeconfig");

  afterAll(async () => {
    for (const [suffix] of CASES)
      await kubectl(kubeconfig, ["delete", "vm", `${NAME}-${suffix}`, "--ignore-not-found", "--wait=false"]);
  });

  it.each(CASES)(
    "%s: the migration Succeeds, the VMI runs on the target with the same uid",
    async (suffix, side, at) => {
      await migrateKillingHandler(kubeconfig, `${NAME}-${suffix}`, side, at);
    },
  );
});

/** A migration that cannot finish (bandwidth capped while the guest dirties its working set), as migrate-cancel's. */
const SLOW_POLICY = "e2e-handler-kill-slow";
const SLOW_LABEL = { "e2e.kubevirt-ts.io/migration": "handler-kill-slow" };

interface VmimFailure {
  status?: { phase?: string; migrationState?: { failed?: boolean; failureReason?: string } };
}

describe("kill -9 of the source handler, then of the target launcher, during a migration", () => {
  const kubeconfig = inject("kubeconfig");
  const name = `${NAME}-failed`;

  afterAll(async () => {
    await kubectl(kubeconfig, ["delete", "vm", name, "--ignore-not-found", "--wait=false"]);
    await kubectl(kubeconfig, ["delete", "migrationpolicy", SLOW_POLICY, "--ignore-not-found"]);
  });

  it("the migration fails with a reason and the guest stays on the source, same VMI, still running", async () => {
    const policy = {
      apiVersion: "migrations.kubevirt.io/v1alpha1",
      kind: "MigrationPolicy",
      metadata: { name: SLOW_POLICY },
      spec: {
        selectors: { virtualMachineInstanceSelector: SLOW_LABEL },
        bandwidthPerMigration: "1Mi",
        completionTimeoutPerGiB: 100_000,
      },
    };
    await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(policy));
    await kubectlOk(
      kubeconfig,
      ["create", "-f", "-"],
      JSON.stringify(testGuestVm(name, { running: true, labels: SLOW_LABEL })),
    );
    const vmi = await eventually(
      async () => {
        const v = await vmiOrUndefined(kubeconfig, name);
        expect(v?.status?.phase).toBe("Running");
        expect(v?.status?.conditions?.find((c) => c.type === "LiveMigratable")?.status).toBe("True");
        return v!;
      },
      { ...CLUSTER_WAIT, timeoutMs: 45_000, what: "a migratable running VMI" },
    );
    const uid = vmi.metadata.uid;
    const sourceNode = vmi.status!.nodeName!;
    const sourcePod = (await launcherPods(kubeconfig, uid)).at(-1)!;
    const watcher = watchVmi(kubeconfig, name);
    try {
      await kubectlOk(
        kubeconfig,
        ["create", "-f", "-"],
        JSON.stringify({
          apiVersion: "kubevirt.io/v1",
          kind: "VirtualMachineInstanceMigration",
          metadata: { name: `${name}-mig` },
          spec: { vmiName: name },
        }),
      );
      await migrationStarted(kubeconfig, sourcePod, 40_000);
      const targetPod = (await launcherPods(kubeconfig, uid)).find((p) => p.spec.nodeName !== sourceNode)!;
      const targetLauncher = launcherPid(targetPod.metadata.uid);
      expect(targetLauncher, "the target launcher's process").toBeDefined();
      const handler = handlerPid(kubeconfig, sourceNode);
      expect(handler, "the source handler's process").toBeDefined();
      // The handler first, so the launcher's failure happens while nobody on the source node watches.
      process.kill(handler!, "SIGKILL");
      process.kill(targetLauncher!, "SIGKILL");
      const atKill = guestProgress(consoleFile(kubeconfig, sourceNode, sourcePod.metadata.uid));

      const vmim = await eventually(
        async () => {
          const m = await getJson<VmimFailure>(kubeconfig, "vmim", `${name}-mig`);
          expect(m.status?.phase).toBe("Failed");
          expect(m.status?.migrationState?.failureReason).toBeTruthy();
          return m;
        },
        { ...CLUSTER_WAIT, timeoutMs: 45_000, what: "the migration to fail with a reason" },
      );
      // The restarted source handler reads the launcher's own account of the failure into the VMI.
      const kept = await eventually(
        async () => {
          const v = await vmiOrUndefined(kubeconfig, name);
          expect(v?.status?.migrationState?.failed).toBe(true);
          expect(v?.status?.migrationState?.failureReason).toBeTruthy();
          return v!;
        },
        { ...CLUSTER_WAIT, timeoutMs: 45_000, what: "the VMI's migrationState to say the migration failed, and why" },
      );
      expect(kept.metadata.uid).toBe(uid);
      expect(kept.status?.phase).toBe("Running");
      expect(kept.status?.nodeName).toBe(sourceNode);
      await eventually(
        () => {
          expect(guestProgress(consoleFile(kubeconfig, sourceNode, sourcePod.metadata.uid))).toBeGreaterThan(
            atKill + 2,
          );
          return true;
        },
        { ...CLUSTER_WAIT, timeoutMs: 20_000, what: "the guest's progress to continue on the source" },
      );
      console.log(
        `[failed migration, source handler killed] ${JSON.stringify({
          vmim: vmim.status?.migrationState?.failureReason,
          vmi: kept.status?.migrationState?.failureReason,
        })}`,
      );
      expect(new Set(watcher.seen.map((s) => s.uid))).toEqual(new Set([uid]));
      expect(watcher.seen.map((s) => s.phase)).not.toContain("Failed");
    } finally {
      watcher.stop();
    }
  });
});
