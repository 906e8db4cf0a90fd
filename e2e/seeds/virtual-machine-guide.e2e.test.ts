/**
 * The VirtualMachine user guide (shared/seeds), its commands as written, in a directory holding vm.yaml: a VM
 * literally named `vm` (the test guest on the native VMM, so every step is quick) goes through kubectl create,
 * `kubectl get vmis`, `virtctl start vm`, both describes, `virtctl restart vm` and `virtctl restart vm --force
 * --grace-period=0`, `kubectl delete virtualmachineinstance vm`, `virtctl stop vm`, the start/stop patches, the
 * orphan delete (`--cascade=false`) with adoption and the cascade delete (`--cascade=true`); then the guide's
 * `virtctl expose virtualmachine vmi-ephemeral --name vmiservice --port 27017 --target-port 22` before that VM starts.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually } from "@kvt/testing";
import { afterAll, describe, expect, inject, it } from "vitest";
import { stringify } from "yaml";
import { type CommandResult, getJson, kubectl, kubectlIn, virtctl } from "../lib/cli.ts";
import { CLUSTER_WAIT } from "../lib/cluster-wait.ts";
import { testGuestVm } from "../lib/manifests.ts";
import { launcherPods, type VmiView, vm, vmiOrUndefined } from "../lib/objects.ts";

const BOOT = { timeoutMs: 150_000, intervalMs: 500 };

function ok(r: CommandResult): string {
  expect(r.code, r.stderr).toBe(0);
  return r.stdout;
}

describe("the VirtualMachine user guide, command by command", () => {
  const kubeconfig = inject("kubeconfig");
  const dir = mkdtempSync(join(tmpdir(), "kvt-e2e-guide-"));
  writeFileSync(join(dir, "vm.yaml"), stringify(testGuestVm("vm", { running: false })));
  writeFileSync(join(dir, "vm-running.yaml"), stringify(testGuestVm("vm", { running: true })));
  writeFileSync(join(dir, "vmi-ephemeral.yaml"), stringify(testGuestVm("vmi-ephemeral", { running: false })));
  /** kubectl as the user types it, in the directory with the manifests. */
  const k = (...args: string[]): Promise<CommandResult> => kubectlIn(dir, kubeconfig, args);
  const v = (...args: string[]): Promise<CommandResult> => virtctl(kubeconfig, args);
  let firmwareUuid: string | undefined;

  afterAll(async () => {
    await kubectl(kubeconfig, ["delete", "vm", "vm", "vmi-ephemeral", "--ignore-not-found", "--wait=false"]);
    await kubectl(kubeconfig, ["delete", "svc", "vmiservice", "--ignore-not-found"]);
  });

  async function runningVmi(notUid?: string): Promise<VmiView> {
    return eventually(async () => {
      const vmi = await vmiOrUndefined(kubeconfig, "vm");
      expect(vmi?.metadata.uid).toBeDefined();
      expect(vmi?.metadata.uid).not.toBe(notUid);
      expect(vmi?.status?.phase).toBe("Running");
      return vmi!;
    }, BOOT);
  }

  it("kubectl create -f vm.yaml; kubectl get vmis lists none", async () => {
    expect(ok(await k("create", "-f", "vm.yaml")).trim()).toBe("virtualmachine.kubevirt.io/vm created");
    const vmis = await k("get", "vmis");
    expect(vmis.code).toBe(0);
    expect(vmis.stdout).not.toMatch(/^vm\s/m);
    if (vmis.stdout === "") expect(vmis.stderr.trim()).toBe("No resources found in default namespace.");
  });

  it("virtctl start vm; kubectl describe virtualmachine vm and virtualmachineinstance vm", async () => {
    expect(ok(await v("start", "vm"))).toBe("VM vm was scheduled to start\n");
    const vmi = await runningVmi();
    firmwareUuid = vmi.spec.domain.firmware?.uuid;
    await eventually(async () => {
      expect((await vm(kubeconfig, "vm")).status).toMatchObject({ created: true, ready: true });
      return true;
    }, CLUSTER_WAIT);
    const vmDescribe = ok(await k("describe", "virtualmachine", "vm"));
    expect(vmDescribe).toMatch(/^Name:\s+vm$/m);
    expect(vmDescribe).toMatch(/^Kind:\s+VirtualMachine$/m);
    expect(vmDescribe).toMatch(/^\s+Created:\s+true$/m);
    expect(vmDescribe).toMatch(/^\s+Ready:\s+true$/m);
    expect(vmDescribe).toMatch(/Normal\s+SuccessfulCreate\s+\S+\s+virtualmachine-controller\s+.*\bvm\b/);
    const vmiDescribe = ok(await k("describe", "virtualmachineinstance", "vm"));
    expect(vmiDescribe).toMatch(/^Kind:\s+VirtualMachineInstance$/m);
    expect(vmiDescribe).toMatch(/^\s+Phase:\s+Running$/m);
    expect(vmiDescribe).toMatch(new RegExp(`^\\s+Node Name:\\s+${vmi.status?.nodeName}$`, "m"));
    expect(vmiDescribe).toMatch(/^\s+Kind:\s+VirtualMachine$/m); // its owner reference
  });

  it("virtctl restart vm, then virtctl restart vm --force --grace-period=0: each a new VMI, same firmware UUID", async () => {
    let vmi = await runningVmi();
    for (const args of [
      ["restart", "vm"],
      ["restart", "vm", "--force", "--grace-period=0"],
    ]) {
      expect(ok(await v(...args))).toBe("VM vm was scheduled to restart\n");
      const next = await runningVmi(vmi.metadata.uid);
      expect(next.spec.domain.firmware?.uuid).toBe(firmwareUuid);
      expect(await launcherPods(kubeconfig, vmi.metadata.uid)).toEqual([]);
      vmi = next;
    }
  });

  it("kubectl delete virtualmachineinstance vm restarts it", async () => {
    const vmi = await runningVmi();
    expect(ok(await k("delete", "virtualmachineinstance", "vm")).trim()).toBe(
      'virtualmachineinstance.kubevirt.io "vm" deleted',
    );
    expect((await runningVmi(vmi.metadata.uid)).spec.domain.firmware?.uuid).toBe(firmwareUuid);
  });

  it("virtctl stop vm; then the guide's patches start and stop it", async () => {
    expect(ok(await v("stop", "vm"))).toBe("VM vm was scheduled to stop\n");
    await eventually(async () => {
      expect(await vmiOrUndefined(kubeconfig, "vm")).toBeUndefined();
      return true;
    }, BOOT);
    ok(await k("patch", "virtualmachine", "vm", "--type", "merge", "-p", '{"spec":{"running":true}}'));
    await runningVmi();
    ok(await k("patch", "virtualmachine", "vm", "--type", "merge", "-p", '{"spec":{"running":false}}'));
    await eventually(async () => {
      expect(await vmiOrUndefined(kubeconfig, "vm")).toBeUndefined();
      return true;
    }, BOOT);
    ok(await k("patch", "virtualmachine", "vm", "--type", "merge", "-p", '{"spec":{"running":true}}'));
    await runningVmi();
  });

  it("kubectl delete virtualmachine vm --cascade=false orphans the VMI; re-creating the VM adopts it", async () => {
    const vmi = await runningVmi();
    const del = await k("delete", "virtualmachine", "vm", "--cascade=false");
    expect(ok(del)).toContain('virtualmachine.kubevirt.io "vm" deleted');
    await eventually(async () => {
      expect((await kubectl(kubeconfig, ["get", "vm", "vm"])).code).not.toBe(0);
      return true;
    }, CLUSTER_WAIT);
    const orphan = await vmiOrUndefined(kubeconfig, "vm");
    expect(orphan?.metadata.uid).toBe(vmi.metadata.uid);
    expect(orphan?.status?.phase).toBe("Running");
    ok(await k("create", "-f", "vm-running.yaml"));
    const recreated = await vm(kubeconfig, "vm");
    await eventually(async () => {
      const adopted = await vmiOrUndefined(kubeconfig, "vm");
      expect(adopted?.metadata.uid).toBe(vmi.metadata.uid);
      expect(adopted?.metadata.ownerReferences?.[0]).toMatchObject({ uid: recreated.metadata.uid, controller: true });
      return true;
    }, CLUSTER_WAIT);
  });

  it("kubectl delete virtualmachine vm --cascade=true deletes the VM and its VMI", async () => {
    expect(ok(await k("delete", "virtualmachine", "vm", "--cascade=true")).trim()).toBe(
      'virtualmachine.kubevirt.io "vm" deleted',
    );
    await eventually(async () => {
      expect(await vmiOrUndefined(kubeconfig, "vm")).toBeUndefined();
      expect((await kubectl(kubeconfig, ["get", "vm", "vm"])).code).not.toBe(0);
      return true;
    }, BOOT);
  });

  it("virtctl expose virtualmachine vmi-ephemeral --name vmiservice --port 27017 --target-port 22, before it starts", async () => {
    ok(await k("create", "-f", "vmi-ephemeral.yaml"));
    const expose = await v(
      "expose",
      "virtualmachine",
      "vmi-ephemeral",
      "--name",
      "vmiservice",
      "--port",
      "27017",
      "--target-port",
      "22",
    );
    expect(ok(expose)).toBe("Service vmiservice successfully created for virtualmachine vmi-ephemeral\n");
    expect(ok(await k("get", "svc", "vmiservice"))).toMatch(/^vmiservice\s+ClusterIP\s+\S+\s+\S+\s+27017\/TCP\s/m);
    const svc = await getJson<{ spec: { selector: Record<string, string> } }>(kubeconfig, "svc", "vmiservice");
    const selector = Object.entries(svc.spec.selector)
      .map(([key, value]) => `${key}=${value}`)
      .join(",");
    // Nothing behind it yet; once the VM runs, its launcher pod is what the service selects, with no further step.
    expect(ok(await k("get", "pods", "-l", selector, "-o", "name")).trim()).toBe("");
    expect(ok(await v("start", "vmi-ephemeral"))).toBe("VM vmi-ephemeral was scheduled to start\n");
    const vmi = await eventually(async () => {
      const running = await vmiOrUndefined(kubeconfig, "vmi-ephemeral");
      expect(running?.status?.phase).toBe("Running");
      return running!;
    }, BOOT);
    const launcher = (await launcherPods(kubeconfig, vmi.metadata.uid)).at(-1)!;
    expect(ok(await k("get", "pods", "-l", selector, "-o", "name")).trim()).toBe(`pod/${launcher.metadata.name}`);
    ok(await k("delete", "virtualmachine", "vmi-ephemeral"));
    // The Service is the user's: it outlives the VM it was made for (no owner reference, as with KubeVirt's).
    await eventually(async () => {
      expect(await vmiOrUndefined(kubeconfig, "vmi-ephemeral")).toBeUndefined();
      return true;
    }, BOOT);
    expect(ok(await k("get", "svc", "vmiservice", "-o", "name")).trim()).toBe("service/vmiservice");
  });
});
