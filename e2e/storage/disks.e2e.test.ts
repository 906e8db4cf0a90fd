/**
 * Disks with the real kubectl and virtctl: the seed's demo VM with a PersistentVolumeClaim disk (the local-path
 * class binds it on first use) and an emptyDisk. Inside the guest (over the console) a marker goes to the claim's
 * disk, found by its serial; it survives `virtctl restart` and `virtctl stop` + `start`, while the emptyDisk comes back
 * empty. A ReadWriteOnce claim makes the VMI LiveMigratable=False (DisksNotLiveMigratable) and `virtctl migrate` is
 * refused with KubeVirt's message; a VM on a ReadWriteMany claim migrates and reads its marker back on the target.
 */

import { eventually } from "@kvt/testing";
import { describe, expect, inject, it } from "vitest";
import { inConsole, kubectlOk, virtctl } from "../lib/cli.ts";
import { CLUSTER_WAIT } from "../lib/cluster-wait.ts";
import {
  BOOT,
  claim,
  expectNotLiveMigratable,
  inGuest,
  MARKER,
  READ,
  READ_DATA,
  running,
  vmWithDisks,
  WRITE,
} from "../lib/disk-vm.ts";
import { vmiOrUndefined } from "../lib/objects.ts";

describe("disks: a claim's data survives restarts, a ReadWriteOnce claim keeps the VMI in place", () => {
  const kubeconfig = inject("kubeconfig");
  const NAME = "e2e-disks";
  let uid = "";

  it("a VM with a claim and an emptyDisk runs; volumeStatus lists them with the claim's access modes", async () => {
    await kubectlOk(kubeconfig, ["create", "-f", "-"], claim("e2e-data", "ReadWriteOnce"));
    await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(vmWithDisks(NAME, "e2e-data")));
    const vmi = await running(kubeconfig, NAME);
    uid = vmi.metadata.uid;
    const volumeStatus = (vmi.status as { volumeStatus?: { name: string; target: string }[] }).volumeStatus ?? [];
    expect(volumeStatus).toContainEqual(
      expect.objectContaining({
        name: "data",
        target: "vdc",
        persistentVolumeClaimInfo: expect.objectContaining({ claimName: "e2e-data", accessModes: ["ReadWriteOnce"] }),
      }),
    );
    const pvc = await kubectlOk(kubeconfig, ["get", "pvc", "e2e-data", "-o", "jsonpath={.status.phase}"]);
    expect(pvc).toBe("Bound");
  });

  it("the guest writes a marker to the claim's disk", async () => {
    expect(await inGuest(kubeconfig, NAME, uid, WRITE)).toContain("WROTE=0");
  });

  it("LiveMigratable is False (DisksNotLiveMigratable) and virtctl migrate is refused with KubeVirt's message", async () => {
    await expectNotLiveMigratable(kubeconfig, NAME, "e2e-data");
  });

  it("virtctl restart: the marker is still on the claim's disk, the emptyDisk is empty again", async () => {
    const r = await virtctl(kubeconfig, ["restart", NAME]);
    expect(r.code, r.stderr).toBe(0);
    uid = (await running(kubeconfig, NAME, uid)).metadata.uid;
    const out = await inGuest(kubeconfig, NAME, uid, READ);
    expect(out).toContain(`READ=${MARKER}`);
    expect(out).toContain("SCRATCH=END");
  });

  it("virtctl stop, then start: the marker is still there", async () => {
    expect((await virtctl(kubeconfig, ["stop", NAME])).code).toBe(0);
    await eventually(
      async () => {
        expect(await vmiOrUndefined(kubeconfig, NAME)).toBeUndefined();
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 90_000 },
    );
    expect((await virtctl(kubeconfig, ["start", NAME])).code).toBe(0);
    uid = (await running(kubeconfig, NAME, uid)).metadata.uid;
    expect(await inGuest(kubeconfig, NAME, uid, READ)).toContain(`READ=${MARKER}`);
    await kubectlOk(kubeconfig, ["delete", "vm", NAME]);
  });
});

describe("disks: a ReadWriteMany claim migrates with the VMI", () => {
  const kubeconfig = inject("kubeconfig");
  const NAME = "e2e-disks-rwx";

  it("writes on the source, migrates, reads the marker on the target", async () => {
    await kubectlOk(kubeconfig, ["create", "-f", "-"], claim("e2e-shared", "ReadWriteMany"));
    const vm = vmWithDisks(NAME, "e2e-shared") as {
      spec: { template: { spec: { domain: { devices: { disks: unknown[] } }; volumes: unknown[] } } };
    };
    // No emptyDisk here: local disks are not copied with the memory yet.
    vm.spec.template.spec.domain.devices.disks.pop();
    vm.spec.template.spec.volumes.pop();
    await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(vm));
    const before = await running(kubeconfig, NAME);
    expect(await inGuest(kubeconfig, NAME, before.metadata.uid, WRITE)).toContain("WROTE=0");
    await eventually(async () => {
      const v = await vmiOrUndefined(kubeconfig, NAME);
      expect(v?.status?.conditions?.find((c) => c.type === "LiveMigratable")?.status).toBe("True");
      return true;
    }, CLUSTER_WAIT);
    const migrate = await virtctl(kubeconfig, ["migrate", NAME]);
    expect(migrate.code, migrate.stderr).toBe(0);
    const after = await eventually(async () => {
      const v = await vmiOrUndefined(kubeconfig, NAME);
      expect(v?.status?.migrationState?.completed).toBe(true);
      expect(v?.status?.nodeName).not.toBe(before.status?.nodeName);
      return v!;
    }, BOOT);
    const session = await inConsole(kubeconfig, NAME, READ_DATA);
    expect(session.stdout).toContain(`READ=${MARKER}`);
    expect(after.status?.nodeName).toBeDefined();
    await kubectlOk(kubeconfig, ["delete", "vm", NAME]);
  });
});
