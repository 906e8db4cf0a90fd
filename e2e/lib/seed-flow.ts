/**
 * The seed's documents, as a new user types them, on the seed's vm-cirros (containerDisk = the local demo image, a
 * Debian kernel with a busybox initramfs): create, start, console (cloud-init line, echo), live migration under a
 * counting shell loop, stop. Shared by the e2e cluster's run (demo-vm.e2e.test.ts: the native VMM where the host's KVM
 * can run Linux, else emulated) and the no-KVM host's run (no-kvm-host.e2e.test.ts: emulated, as KubeVirt's
 * useEmulation allows).
 */

import { eventually } from "@kvt/testing";
import { beforeAll, describe, expect, it } from "vitest";
import { kubectl, kubectlOk, virtctl } from "./cli.ts";
import { CLUSTER_WAIT } from "./cluster-wait.ts";
import { consoleLog } from "./console-log.ts";
import { demoVmYaml } from "./manifests.ts";
import { launcherPods, vm, vmiOrUndefined } from "./objects.ts";

const NAME = "vm-cirros";
const BOOT = { timeoutMs: 240_000, intervalMs: 1000 };

/**
 * Declares the seed's flow as a `describe` block. `kubeconfig()` is read when the tests run (a cluster started in
 * `beforeAll` is there by then); `expectEmulated`: the VMI must (true) or must not (false) carry SoftwareEmulation;
 * undefined accepts either (the backend depends on the host).
 */
export function describeSeedVmFlow(title: string, kubeconfigOf: () => string, expectEmulated?: boolean): void {
  describe(title, () => {
    let kubeconfig = "";
    let vmiUid = "";

    beforeAll(() => {
      kubeconfig = kubeconfigOf();
    });

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

    it("virtctl start vm vm-cirros (as the guide writes it); the VMI runs and kubectl describe shows the SuccessfulCreate event", async () => {
      const start = await virtctl(kubeconfig, ["start", "vm", NAME]);
      expect(start.code, start.stderr).toBe(0);
      expect(start.stdout).toContain(`VM ${NAME} was scheduled to start`);
      const vmi = await eventually(async () => {
        const v = await vmiOrUndefined(kubeconfig, NAME);
        expect(v?.status?.phase).toBe("Running");
        return v!;
      }, BOOT);
      vmiUid = vmi.metadata.uid;
      const emulated = vmi.status?.conditions?.find((c) => c.type === "SoftwareEmulation")?.status === "True";
      if (expectEmulated !== undefined) expect(emulated).toBe(expectEmulated);
      await eventually(async () => {
        expect((await vm(kubeconfig, NAME)).status).toMatchObject({ created: true, ready: true });
        return true;
      }, CLUSTER_WAIT);
      const describe = await kubectlOk(kubeconfig, ["describe", "vm", NAME]);
      // KubeVirt's current wording (the seed's 2018 text read "Created virtual machine: vm-cirros").
      expect(describe).toMatch(
        /Normal\s+SuccessfulCreate\s+\S+\s+virtualmachine-controller\s+Started the virtual machine by creating the new virtual machine instance vm-cirros/,
      );
    });

    it("its console shows the cloud-init line and answers echo hi", async () => {
      await eventually(async () => {
        expect(await consoleLog(kubeconfig, vmiUid)).toContain("printed from cloud-init userdata");
        return true;
      }, BOOT);
      const session = await virtctl(kubeconfig, ["console", NAME], "echo hi-$((40+2))\r", 20_000, /hi-42/);
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
      await eventually(
        async () => {
          expect(await consoleLog(kubeconfig, vmiUid)).toMatch(/count=3\b/);
          return true;
        },
        { ...CLUSTER_WAIT, timeoutMs: 60_000 },
      );
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
      const targetPod = (await launcherPods(kubeconfig, vmiUid)).find(
        (p) => p.spec.nodeName === after.status?.nodeName,
      )!.metadata.name;
      await eventually(
        async () => {
          const onTarget = counts(await consoleLog(kubeconfig, vmiUid, targetPod));
          expect(Math.min(...onTarget)).toBeLessThanOrEqual(last + 1);
          expect(Math.max(...onTarget)).toBeGreaterThan(last + 2);
          return true;
        },
        { ...CLUSTER_WAIT, timeoutMs: 60_000 },
      );
    });

    it("virtctl stop vm-cirros removes the VMI; a second stop is refused as KubeVirt refuses it", async () => {
      const stop = await virtctl(kubeconfig, ["stop", NAME]);
      expect(stop.code, stop.stderr).toBe(0);
      await eventually(
        async () => {
          expect(await vmiOrUndefined(kubeconfig, NAME)).toBeUndefined();
          return true;
        },
        { ...CLUSTER_WAIT, timeoutMs: 90_000 },
      );
      const again = await virtctl(kubeconfig, ["stop", NAME]);
      expect(again.code).not.toBe(0);
      expect(again.stderr).toMatch(/VM is not running/);
      await kubectlOk(kubeconfig, ["delete", "vm", NAME]);
    });
  });
}
