/**
 * virtctl's VM and VMI actions on a running test guest (native VMM), as a user types them: start, the conflicts
 * KubeVirt answers with 409 (start an Always VM, migrate or stop a stopped one, pause a paused VMI, unpause a running
 * one), pause/unpause (Paused condition, the guest's progress stops and resumes), soft-reboot, expose, restart and
 * restart --force --grace-period=0 (a new VMI with the same firmware UUID), stop.
 */

import { eventually } from "@kvt/testing";
import { afterAll, describe, expect, inject, it } from "vitest";
import { type CommandResult, getJson, kubectl, kubectlOk, kubectlWatch, virtctl } from "../lib/cli.ts";
import { CLUSTER_WAIT } from "../lib/cluster-wait.ts";
import { consoleLog, progressLines } from "../lib/console-log.ts";
import { testGuestVm } from "../lib/manifests.ts";
import { launcherPods, type VmiView, vm, vmiOrUndefined } from "../lib/objects.ts";

const NAME = "e2e-virtctl";
/** The VM's terminationGracePeriodSeconds; a forced stop/restart cuts the VMI's to 0/1 first. */
const GRACE_SECONDS = 20;
const BOOT = { timeoutMs: 150_000, intervalMs: 500 };

/** KubeVirt's 409 text for a VM or VMI, as the API server words a Conflict Status. */
function conflictText(resource: "virtualmachine" | "virtualmachineinstance", message: string): string {
  return `Operation cannot be fulfilled on ${resource}.kubevirt.io "${NAME}": ${message}`;
}

/** virtctl failed the way KubeVirt's does: exit code 1, the message on stderr, nothing on stdout. */
function expectRefused(r: CommandResult, stderr: string): void {
  expect(r.code, r.stdout).toBe(1);
  expect(r.stderr.trim()).toBe(stderr);
  expect(r.stdout).toBe("");
}

function condition(vmi: VmiView | undefined, type: string): { status: string; reason?: string } | undefined {
  return vmi?.status?.conditions?.find((c) => c.type === type);
}

describe("virtctl against a running test guest", () => {
  const kubeconfig = inject("kubeconfig");
  let vmi: VmiView;

  /** The highest progress line the VMI's current launcher has printed. */
  async function lastProgress(uid: string): Promise<number> {
    return Math.max(0, ...progressLines(await consoleLog(kubeconfig, uid)).keys());
  }

  async function runningVmi(notUid?: string): Promise<VmiView> {
    return eventually(async () => {
      const v = await vmiOrUndefined(kubeconfig, NAME);
      expect(v?.metadata.uid).toBeDefined();
      expect(v?.metadata.uid).not.toBe(notUid);
      expect(v?.status?.phase).toBe("Running");
      return v!;
    }, BOOT);
  }

  afterAll(async () => {
    await kubectl(kubeconfig, ["delete", "vm", NAME, "--ignore-not-found", "--wait=false"]);
    await kubectl(kubeconfig, ["delete", "svc", `${NAME}-ssh`, "--ignore-not-found"]);
  });

  it("refuses to migrate, stop, restart or pause a stopped VM", async () => {
    await kubectlOk(
      kubeconfig,
      ["create", "-f", "-"],
      JSON.stringify(testGuestVm(NAME, { running: false, terminationGracePeriodSeconds: GRACE_SECONDS })),
    );
    // KubeVirt looks the VMI up first: no VMI is its NotFound, passed through.
    expectRefused(
      await virtctl(kubeconfig, ["migrate", NAME]),
      `Error migrating VirtualMachine virtualmachineinstance.kubevirt.io "${NAME}" not found`,
    );
    expectRefused(
      await virtctl(kubeconfig, ["stop", NAME]),
      `error stopping VirtualMachine ${conflictText("virtualmachine", "VM is not running")}`,
    );
    const restart = await virtctl(kubeconfig, ["restart", NAME]);
    expect(restart.code).toBe(1);
    expect(restart.stderr).toMatch(/^error restarting VirtualMachine: Operation cannot be fulfilled on/);
    expectRefused(
      await virtctl(kubeconfig, ["pause", "vm", NAME]),
      `Error pausing VirtualMachineInstance ${NAME}. VirtualMachine ${NAME} is not set to run`,
    );
    // Nothing was created by any of them.
    expect(await vmiOrUndefined(kubeconfig, NAME)).toBeUndefined();
    expect((await kubectlOk(kubeconfig, ["get", "vmim", "-o", "name"])).trim()).not.toContain(NAME);
  });

  it("virtctl start runs it; starting it again is KubeVirt's conflict", async () => {
    const start = await virtctl(kubeconfig, ["start", NAME]);
    expect(start.code, start.stderr).toBe(0);
    expect(start.stdout).toBe(`VM ${NAME} was scheduled to start\n`);
    vmi = await runningVmi();
    await eventually(async () => {
      expect((await vm(kubeconfig, NAME)).status?.printableStatus).toBe("Running");
      return true;
    }, CLUSTER_WAIT);
    expectRefused(
      await virtctl(kubeconfig, ["start", NAME]),
      `Error starting VirtualMachine ${conflictText("virtualmachine", "VM is already running")}`,
    );
    await eventually(async () => {
      expect(await lastProgress(vmi.metadata.uid)).toBeGreaterThan(2);
      return true;
    }, BOOT);
  });

  it("pause vm freezes the guest (Paused condition, no progress); pausing again or soft-rebooting it is KubeVirt's conflict; unpause resumes it", async () => {
    const unpauseRunning = await virtctl(kubeconfig, ["unpause", "vmi", NAME]);
    expectRefused(
      unpauseRunning,
      `Error unpausing VirtualMachineInstance ${NAME}: ${conflictText("virtualmachineinstance", "VMI is not paused")}`,
    );

    const pause = await virtctl(kubeconfig, ["pause", "vm", NAME]);
    expect(pause.code, pause.stderr).toBe(0);
    expect(pause.stdout).toBe(`VMI ${NAME} was scheduled to pause\n`);
    await eventually(async () => {
      const v = await vmiOrUndefined(kubeconfig, NAME);
      expect(condition(v, "Paused")).toMatchObject({ status: "True", reason: "PausedByUser" });
      return true;
    }, CLUSTER_WAIT);
    await eventually(async () => {
      expect((await vm(kubeconfig, NAME)).status?.printableStatus).toBe("Paused");
      return true;
    }, CLUSTER_WAIT);
    // Frozen: the last line stays the last line while a running guest would have printed several more.
    const frozenAt = await lastProgress(vmi.metadata.uid);
    const rate = await linesPerSecondBefore(frozenAt);
    await new Promise((r) => setTimeout(r, Math.max(3000, Math.ceil(5000 / rate))));
    expect(await lastProgress(vmi.metadata.uid)).toBe(frozenAt);

    expectRefused(
      await virtctl(kubeconfig, ["pause", "vmi", NAME]),
      `Error pausing VirtualMachineInstance ${NAME}: ${conflictText("virtualmachineinstance", "VMI is already paused")}`,
    );
    expectRefused(
      await virtctl(kubeconfig, ["soft-reboot", NAME]),
      `Error soft rebooting VirtualMachineInstance ${NAME}: ${conflictText("virtualmachineinstance", "VMI is paused")}`,
    );

    const unpause = await virtctl(kubeconfig, ["unpause", "vm", NAME]);
    expect(unpause.code, unpause.stderr).toBe(0);
    expect(unpause.stdout).toBe(`VMI ${NAME} was scheduled to unpause\n`);
    await eventually(async () => {
      expect(condition(await vmiOrUndefined(kubeconfig, NAME), "Paused")).toBeUndefined();
      return true;
    }, CLUSTER_WAIT);
    await eventually(async () => {
      expect((await vm(kubeconfig, NAME)).status?.printableStatus).toBe("Running");
      return true;
    }, CLUSTER_WAIT);
    // Resumed where it stopped: the same VMI, the sequence continues past the frozen line.
    await eventually(
      async () => {
        expect(await lastProgress(vmi.metadata.uid)).toBeGreaterThan(frozenAt + 1);
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 60_000 },
    );
    expect((await vmiOrUndefined(kubeconfig, NAME))?.metadata.uid).toBe(vmi.metadata.uid);
  });

  /** Progress lines per second the running guest printed so far (its console timestamps are not needed). */
  async function linesPerSecondBefore(last: number): Promise<number> {
    const pod = (await launcherPods(kubeconfig, vmi.metadata.uid)).at(-1)!;
    const ageSeconds = (Date.now() - Date.parse(pod.metadata.creationTimestamp)) / 1000;
    return Math.max(0.1, last / Math.max(1, ageSeconds));
  }

  it("soft-reboot of the test guest (no ACPI, no agent) fails on our VMM and leaves it running", async () => {
    const r = await virtctl(kubeconfig, ["soft-reboot", NAME]);
    // On a host whose KVM cannot run the guest it runs emulated, and the QEMU backend's soft reboot is QMP
    // system_reset, which succeeds for any guest (a known difference from the native backend, not yet KubeVirt's
    // ACPI power-button reboot): there the command succeeds and the VMI stays the same one.
    const emulated = vmi.status?.conditions?.some((c) => c.type === "SoftwareEmulation" && c.status === "True");
    if (emulated) expect(r.code, r.stderr).toBe(0);
    else {
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(new RegExp(`^Error soft rebooting VirtualMachineInstance ${NAME}: `));
    }
    console.log(`[soft-reboot] ${emulated ? "emulated: " : ""}${(r.stderr || r.stdout).trim()}`);
    const after = await vmiOrUndefined(kubeconfig, NAME);
    expect(after?.metadata.uid).toBe(vmi.metadata.uid);
    expect(after?.status?.phase).toBe("Running");
  });

  it("expose vm creates a ClusterIP Service selecting the VM's launcher pod", async () => {
    const r = await virtctl(kubeconfig, [
      "expose",
      "vm",
      NAME,
      "--name",
      `${NAME}-ssh`,
      "--port",
      "27017",
      "--target-port",
      "22",
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(`Service ${NAME}-ssh successfully created for vm ${NAME}\n`);
    const svc = await getJson<{
      spec: {
        type: string;
        selector: Record<string, string>;
        ports: { port: number; targetPort: number; protocol: string }[];
      };
      metadata: { ownerReferences?: { kind: string; name: string }[] };
    }>(kubeconfig, "svc", `${NAME}-ssh`);
    expect(svc.spec.type).toBe("ClusterIP");
    expect(svc.spec.ports).toEqual([expect.objectContaining({ port: 27017, targetPort: 22, protocol: "TCP" })]);
    expect(svc.spec.selector).toEqual({ "vm.kubevirt.io/name": NAME });
    // The selector picks exactly the VMI's launcher pod.
    const selected = await kubectlOk(kubeconfig, ["get", "pods", "-l", "vm.kubevirt.io/name=" + NAME, "-o", "name"]);
    const launcher = (await launcherPods(kubeconfig, vmi.metadata.uid)).at(-1)!;
    expect(selected.trim().split("\n")).toEqual([`pod/${launcher.metadata.name}`]);
    const table = await kubectlOk(kubeconfig, ["get", "svc", `${NAME}-ssh`]);
    expect(table).toMatch(new RegExp(`^${NAME}-ssh\\s+ClusterIP\\s+\\S+\\s+\\S+\\s+27017/TCP\\s`, "m"));
    // A second expose with the same name is the API server's AlreadyExists.
    const again = await virtctl(kubeconfig, ["expose", "vm", NAME, "--name", `${NAME}-ssh`, "--port", "27017"]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^service creation failed: .*already exists/);
  });

  /** Watches the VMI's terminationGracePeriodSeconds while `act` runs, until the VMI `uid` is gone. */
  async function graceWhile(uid: string, act: () => Promise<void>): Promise<string[]> {
    const watch = kubectlWatch(kubeconfig, [
      "get",
      "vmi",
      NAME,
      "-w",
      "-o",
      'jsonpath={.metadata.uid}{" "}{.spec.terminationGracePeriodSeconds}{"\\n"}',
    ]);
    await eventually(() => {
      expect(watch.output()).toContain(uid);
      return true;
    }, CLUSTER_WAIT);
    await act();
    await eventually(async () => {
      expect((await vmiOrUndefined(kubeconfig, NAME))?.metadata.uid).not.toBe(uid);
      return true;
    }, BOOT);
    const lines = (await watch.stop()).split("\n").filter((l) => l.startsWith(uid));
    return lines.map((l) => l.slice(uid.length + 1));
  }

  it("restart replaces the VMI: new uid, same firmware UUID, the VM's grace period untouched", async () => {
    const uuid = vmi.spec.domain.firmware?.uuid;
    expect(uuid).toMatch(/^[0-9a-f-]{36}$/);
    const started = Date.now();
    const graces = await graceWhile(vmi.metadata.uid, async () => {
      const r = await virtctl(kubeconfig, ["restart", NAME]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toBe(`VM ${NAME} was scheduled to restart\n`);
    });
    const next = await runningVmi(vmi.metadata.uid);
    console.log(`[restart] new VMI Running after ${((Date.now() - started) / 1000).toFixed(1)} s`);
    expect(new Set(graces)).toEqual(new Set([String(GRACE_SECONDS)]));
    expect(next.spec.domain.firmware?.uuid).toBe(uuid);
    expect(next.metadata.ownerReferences?.[0]?.uid).toBe((await vm(kubeconfig, NAME)).metadata.uid);
    vmi = next;
    await eventually(async () => {
      expect(await lastProgress(vmi.metadata.uid)).toBeGreaterThan(0);
      return true;
    }, BOOT);
  });

  it("restart --force --grace-period=0 cuts the VMI's grace period first, then replaces it", async () => {
    expectRefused(
      await virtctl(kubeconfig, ["restart", NAME, "--force"]),
      "Must both use --force=true and set --grace-period.",
    );
    expectRefused(
      await virtctl(kubeconfig, ["restart", NAME, "--force", "--grace-period=5"]),
      `error force restarting VirtualMachine: For force restart, only gracePeriod=0 is supported for now`,
    );
    const oldPod = (await launcherPods(kubeconfig, vmi.metadata.uid)).at(-1)!;
    const started = Date.now();
    const graces = await graceWhile(vmi.metadata.uid, async () => {
      const r = await virtctl(kubeconfig, ["restart", NAME, "--force", "--grace-period=0"]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toBe(`VM ${NAME} was scheduled to restart\n`);
    });
    const next = await runningVmi(vmi.metadata.uid);
    console.log(
      `[restart --force] VMI grace periods seen ${JSON.stringify(graces)}; new VMI Running after ${((Date.now() - started) / 1000).toFixed(1)} s`,
    );
    // KubeVirt's force restart: the VMI's grace period drops to 1 s before the restart requests are written.
    expect(graces[0]).toBe(String(GRACE_SECONDS));
    expect(graces.at(-1)).toBe("1");
    expect((await kubectl(kubeconfig, ["get", "pod", oldPod.metadata.name, "-o", "name"])).code).not.toBe(0);
    expect(next.spec.domain.firmware?.uuid).toBe(vmi.spec.domain.firmware?.uuid);
    expect(next.spec.terminationGracePeriodSeconds).toBe(GRACE_SECONDS);
    vmi = next;
  });

  it("stop --force --grace-period=0 removes the VMI; stopping again is KubeVirt's conflict", async () => {
    const graces = await graceWhile(vmi.metadata.uid, async () => {
      const r = await virtctl(kubeconfig, ["stop", NAME, "--force", "--grace-period=0"]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toBe(`VM ${NAME} was scheduled to stop\n`);
    });
    expect(graces.at(-1)).toBe("0");
    await eventually(
      async () => {
        expect(await vmiOrUndefined(kubeconfig, NAME)).toBeUndefined();
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 90_000 },
    );
    await eventually(async () => {
      expect((await vm(kubeconfig, NAME)).status?.printableStatus).toBe("Stopped");
      return true;
    }, CLUSTER_WAIT);
    expectRefused(
      await virtctl(kubeconfig, ["stop", NAME]),
      `error stopping VirtualMachine ${conflictText("virtualmachine", "VM is not running")}`,
    );
    expectRefused(
      await virtctl(kubeconfig, ["unpause", "vmi", NAME]),
      `Error unpausing VirtualMachineInstance ${NAME}: virtualmachineinstance.kubevirt.io "${NAME}" not found`,
    );
  });

  it("start --paused runs the new VMI paused (startStrategy Paused) until unpaused", async () => {
    const start = await virtctl(kubeconfig, ["start", NAME, "--paused"]);
    expect(start.code, start.stderr).toBe(0);
    expect(start.stdout).toBe(`VM ${NAME} was scheduled to start\n`);
    const paused = await runningVmi();
    // virt-controller's half: the new VMI asks to start paused.
    expect((paused.spec as { startStrategy?: string }).startStrategy).toBe("Paused");
    // virt-handler's and the launcher's half: the domain starts paused and the VMI says so.
    await eventually(async () => {
      expect(condition(await vmiOrUndefined(kubeconfig, NAME), "Paused")?.status).toBe("True");
      return true;
    }, CLUSTER_WAIT);
    await eventually(async () => {
      expect((await vm(kubeconfig, NAME)).status?.printableStatus).toBe("Paused");
      return true;
    }, CLUSTER_WAIT);
    // The guest has not run: no progress line at all.
    await new Promise((r) => setTimeout(r, 3000));
    expect(await lastProgress(paused.metadata.uid)).toBe(0);
    const unpause = await virtctl(kubeconfig, ["unpause", "vmi", NAME]);
    expect(unpause.code, unpause.stderr).toBe(0);
    await eventually(async () => {
      expect(await lastProgress(paused.metadata.uid)).toBeGreaterThan(1);
      return true;
    }, BOOT);
  });
});
