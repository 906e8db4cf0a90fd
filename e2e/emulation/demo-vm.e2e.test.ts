/**
 * The seed's documents, as a new user types them, on the seed's vm-cirros (containerDisk = the local demo image, a
 * Debian kernel with a busybox initramfs). This machine's KVM is PVM, so the VMI runs emulated (QEMU TCG) and says
 * so; the flow is the same on the native VMM on hardware KVM.
 */
import { describe, expect, inject, it } from "vitest";
import { kubectl, kubectlOk, virtctl } from "../lib/cli.ts";
import { consoleLog } from "../lib/console-log.ts";
import { eventually } from "../lib/eventually.ts";
import { demoVmYaml } from "../lib/manifests.ts";
import { launcherPods, vm, vmiOrUndefined } from "../lib/objects.ts";

const NAME = "vm-cirros";
const BOOT = { timeoutMs: 240_000, intervalMs: 1000 };

describe("the seed's vm-cirros with kubectl and virtctl (emulated here)", () => {
  const kubeconfig = inject("kubeconfig");
  let vmiUid = "";

  it("kubectl create -f vm.yaml; no VMI until started", async () => {
    expect((await kubectlOk(kubeconfig, ["create", "-f", "-"], demoVmYaml())).trim()).toBe(
      `virtualmachine.kubevirt.io/${NAME} created`,
    );
    expect(await vmiOrUndefined(kubeconfig, NAME)).toBeUndefined();
    // "Since spec.running is set to false, no vmi will be created: kubectl get vmis"
    const vmis = await kubectl(kubeconfig, ["get", "vmis"]);
    expect(vmis.code).toBe(0);
    expect(vmis.stdout).not.toMatch(new RegExp(`^${NAME}\\s`, "m"));
  });

  it("virtctl start vm vm-cirros (as the guide writes it); the VMI runs emulated and kubectl describe shows the SuccessfulCreate event", async () => {
    const start = await virtctl(kubeconfig, ["start", "vm", NAME]);
    expect(start.code, start.stderr).toBe(0);
    expect(start.stdout).toContain(`VM ${NAME} was scheduled to start`);
    const vmi = await eventually(async () => {
      const v = await vmiOrUndefined(kubeconfig, NAME);
      expect(v?.status?.phase).toBe("Running");
      return v!;
    }, BOOT);
    vmiUid = vmi.metadata.uid;
    expect(vmi.status?.conditions?.find((c) => c.type === "SoftwareEmulation")?.status).toBe("True");
    await eventually(async () =>
      expect((await vm(kubeconfig, NAME)).status).toMatchObject({ created: true, ready: true }),
    );
    const describe = await kubectlOk(kubeconfig, ["describe", "vm", NAME]);
    // KubeVirt's current wording (the seed's 2018 text read "Created virtual machine: vm-cirros").
    expect(describe).toMatch(
      /Normal\s+SuccessfulCreate\s+\S+\s+virtualmachine-controller\s+Started the virtual machine by creating the new virtual machine instance vm-cirros/,
    );
  });

  it("its console shows the cloud-init line and answers echo hi", async () => {
    await eventually(
      async () => expect(await consoleLog(kubeconfig, vmiUid)).toContain("printed from cloud-init userdata"),
      BOOT,
    );
    const session = await virtctl(kubeconfig, ["console", NAME], "echo hi-$((40+2))\r", 20_000);
    expect(session.stdout).toContain("hi-42");
  });

  it("virtctl migrate moves it to the other node while a shell loop keeps counting", async () => {
    // A counter in the guest, started through the console.
    await virtctl(
      kubeconfig,
      ["console", NAME],
      "(i=0; while true; do i=$((i+1)); echo count=$i; sleep 1; done) &\r",
      8000,
    );
    await eventually(async () => expect(await consoleLog(kubeconfig, vmiUid)).toMatch(/count=3\b/), {
      timeoutMs: 60_000,
    });
    const before = await vmiOrUndefined(kubeconfig, NAME);
    const sourcePod = (await launcherPods(kubeconfig, vmiUid)).at(-1)!.metadata.name;
    const migrate = await virtctl(kubeconfig, ["migrate", NAME]);
    expect(migrate.code, migrate.stderr).toBe(0);
    expect(migrate.stdout).toContain(`VM ${NAME} was scheduled to migrate`);
    const after = await eventually(async () => {
      const v = await vmiOrUndefined(kubeconfig, NAME);
      expect(v?.status?.migrationState?.completed).toBe(true);
      expect(v?.status?.nodeName).not.toBe(before?.status?.nodeName);
      return v!;
    }, BOOT);
    const counts = (log: string): number[] => [...log.matchAll(/count=(\d+)/g)].map((m) => Number(m[1]));
    const last = Math.max(...counts(await consoleLog(kubeconfig, vmiUid, sourcePod)));
    const targetPod = (await launcherPods(kubeconfig, vmiUid)).find((p) => p.spec.nodeName === after.status?.nodeName)!
      .metadata.name;
    await eventually(
      async () => {
        const onTarget = counts(await consoleLog(kubeconfig, vmiUid, targetPod));
        expect(Math.min(...onTarget)).toBeLessThanOrEqual(last + 1);
        expect(Math.max(...onTarget)).toBeGreaterThan(last + 2);
      },
      { timeoutMs: 60_000 },
    );
  });

  it("virtctl stop vm-cirros removes the VMI; a second stop is refused as KubeVirt refuses it", async () => {
    const stop = await virtctl(kubeconfig, ["stop", NAME]);
    expect(stop.code, stop.stderr).toBe(0);
    await eventually(async () => expect(await vmiOrUndefined(kubeconfig, NAME)).toBeUndefined(), { timeoutMs: 90_000 });
    const again = await virtctl(kubeconfig, ["stop", NAME]);
    expect(again.code).not.toBe(0);
    expect(again.stderr).toMatch(/VM is not running/);
    await kubectlOk(kubeconfig, ["delete", "vm", NAME]);
  });
});
