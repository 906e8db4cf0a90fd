/**
 * Raw block volumes with the real kubectl and virtctl: Block claims of the local cluster's local-block class (a loop
 * device each) as the disks of the seed's demo VM (QEMU, emulated). The launcher pod maps them as volumeDevices at
 * /dev/<volume>, volumeStatus says volumeMode Block, and the guest's disks are the devices themselves: a marker
 * written to the claim's disk survives `virtctl restart`, while a write to an ephemeral volume over a Block claim (a
 * copy-on-write layer over its device) is gone after it and never reaches that claim. A ReadWriteOnce Block claim
 * keeps the VMI from migrating with KubeVirt's message. Deleting the claims detaches their loop devices. A VM on a
 * ReadWriteMany Block claim is LiveMigratable and moves with `virtctl migrate`: the target opens the same device (the
 * claim is shared, not copied), and the marker written on the source reads back there and is in the claim's file.
 * Each of its steps has its own bound, named when it fails, and a failure prints what the cluster says of the VMI
 * (lib/diagnostics.ts). (On our VMM, the disk-copy figures of such a move are asserted in the nested lane's block group.)
 */
import { execFileSync } from "node:child_process";
import { closeSync, openSync, readlinkSync, readSync } from "node:fs";
import { eventually } from "@kvt/testing";
import { describe, expect, inject, it } from "vitest";
import { getJson, inConsole, kubectlOk, virtctl } from "../lib/cli.ts";
import { CLUSTER_WAIT } from "../lib/cluster-wait.ts";
import { diagnoseOnFailure } from "../lib/diagnostics.ts";
import {
  claim,
  expectNotLiveMigratable,
  findDisk,
  inGuest,
  MARKER,
  READ_DATA,
  running,
  vmWithDisks,
  WRITE,
} from "../lib/disk-vm.ts";
import { launcherPods, vmiOrUndefined } from "../lib/objects.ts";

const root = process.getuid?.() === 0;
const BLOCK = { volumeMode: "Block", storageClassName: "local-block" };

/**
 * The demo VM with the Block claim `data` (serial DATA; the emptyDisk dropped) and an ephemeral volume over Block
 * claim `golden` (serial GOLD).
 */
function blockVm(name: string, data: string, golden: string): Record<string, unknown> {
  const vm = vmWithDisks(name, data) as {
    spec: { template: { spec: { domain: { devices: { disks: unknown[] } }; volumes: unknown[] } } };
  };
  const spec = vm.spec.template.spec;
  spec.domain.devices.disks.pop();
  spec.volumes.pop();
  spec.domain.devices.disks.push({ name: "golden", serial: "GOLD", disk: { bus: "virtio" } });
  spec.volumes.push({ name: "golden", ephemeral: { persistentVolumeClaim: { claimName: golden } } });
  return vm;
}

/** The demo VM with only the ReadWriteMany Block claim `claimName` (serial DATA; the emptyDisk dropped). */
function rwxVm(name: string, claimName: string): Record<string, unknown> {
  const vm = vmWithDisks(name, claimName) as {
    spec: { template: { spec: { domain: { devices: { disks: unknown[] } }; volumes: unknown[] } } };
  };
  vm.spec.template.spec.domain.devices.disks.pop();
  vm.spec.template.spec.volumes.pop();
  return vm;
}

/** Shell: writes a second marker to the GOLD disk; prints GWROTE=<dd's status>. */
const WRITE_GOLD = `${findDisk("GOLD", "G")}; echo gold$((4000+242)) | dd of=$G bs=512 count=1 conv=sync,fsync 2>/dev/null; echo GWROTE=$?`;
/** Shell: prints GOLD=<the GOLD disk's first bytes>END. */
const READ_GOLD = `${findDisk("GOLD", "G")}; echo GOLD=$(dd if=$G bs=512 count=1 2>/dev/null | tr -d '\\000' | head -c 8)END`;

/** The loop devices of the machine: device -> backing file. */
function loopDevices(): Map<string, string> {
  const out = execFileSync("losetup", ["--list", "--json", "--output", "NAME,BACK-FILE"], { encoding: "utf8" });
  const list =
    out.trim() === "" ? [] : (JSON.parse(out) as { loopdevices: { name: string; "back-file": string }[] }).loopdevices;
  return new Map(list.map((d) => [d.name, d["back-file"]]));
}

/** The first 512 bytes of `file`. */
function firstSector(file: string): Buffer {
  const head = Buffer.alloc(512);
  const fd = openSync(file, "r");
  try {
    readSync(fd, head, 0, 512, 0);
  } finally {
    closeSync(fd);
  }
  return head;
}

/** The device link (PV local.path) of bound claim `name`. */
async function deviceLinkOf(kubeconfig: string, name: string): Promise<string> {
  const pvc = await getJson<{ spec: { volumeName: string } }>(kubeconfig, "pvc", name);
  const pv = await getJson<{ spec: { volumeMode: string; local: { path: string } } }>(
    kubeconfig,
    "pv",
    pvc.spec.volumeName,
  );
  expect(pv.spec.volumeMode).toBe("Block");
  return pv.spec.local.path;
}

describe.runIf(root)("Block claims as disks (loop devices, root)", () => {
  const kubeconfig = inject("kubeconfig");
  const NAME = "e2e-block";
  /** The VM on a ReadWriteMany Block claim: created with the first, so its boot overlaps the first's (CI time). */
  const RWX = "e2e-block-rwx";
  let uid = "";
  let links: string[] = [];

  it("a VM on Block claims runs: volumeDevices at /dev/<volume>, volumeMode Block, a loop device per claim", async () => {
    await kubectlOk(kubeconfig, ["create", "-f", "-"], claim("e2e-block-data", "ReadWriteOnce", BLOCK));
    await kubectlOk(kubeconfig, ["create", "-f", "-"], claim("e2e-block-golden", "ReadWriteOnce", BLOCK));
    await kubectlOk(kubeconfig, ["create", "-f", "-"], claim("e2e-block-shared", "ReadWriteMany", BLOCK));
    const vm = blockVm(NAME, "e2e-block-data", "e2e-block-golden");
    await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(vm));
    await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(rwxVm(RWX, "e2e-block-shared")));
    const vmi = await running(kubeconfig, NAME);
    uid = vmi.metadata.uid;
    const volumeStatus = (vmi.status as { volumeStatus?: unknown[] }).volumeStatus ?? [];
    expect(volumeStatus).toContainEqual(
      expect.objectContaining({
        name: "data",
        persistentVolumeClaimInfo: expect.objectContaining({ claimName: "e2e-block-data", volumeMode: "Block" }),
      }),
    );
    const [pod] = await launcherPods(kubeconfig, uid);
    const compute = pod?.spec.containers?.find((c) => c.name === "compute");
    expect(compute?.volumeDevices).toEqual([
      { name: "data", devicePath: "/dev/data" },
      { name: "golden", devicePath: "/dev/golden" },
    ]);
    links = [await deviceLinkOf(kubeconfig, "e2e-block-data"), await deviceLinkOf(kubeconfig, "e2e-block-golden")];
    const devices = loopDevices();
    for (const link of links) expect(devices.get(readlinkSync(link))).toBe(`${link}.img`);
  });

  it("the guest writes a marker to the Block claim's disk and another to the ephemeral disk", async () => {
    const out = await inGuest(kubeconfig, NAME, uid, `${WRITE}; ${WRITE_GOLD}`);
    expect(out).toContain("WROTE=0");
    expect(out).toContain("GWROTE=0");
  });

  it("LiveMigratable is False for the ReadWriteOnce Block claim, and virtctl migrate is refused", async () => {
    await expectNotLiveMigratable(kubeconfig, NAME, "e2e-block-data");
  });

  it("a VM on a ReadWriteMany Block claim is LiveMigratable and moves with virtctl migrate; the claim is shared", async () => {
    let rwxUid = "";
    diagnoseOnFailure(kubeconfig, RWX, () => rwxUid);
    const before = await eventually(
      async () => {
        const v = await vmiOrUndefined(kubeconfig, RWX);
        expect(v?.status?.phase).toBe("Running");
        return v!;
      },
      { timeoutMs: 120_000, intervalMs: 1000, what: `VMI ${RWX} to run` },
    );
    rwxUid = before.metadata.uid;
    expect((before.status as { volumeStatus?: unknown[] }).volumeStatus).toContainEqual(
      expect.objectContaining({
        name: "data",
        persistentVolumeClaimInfo: expect.objectContaining({ accessModes: ["ReadWriteMany"], volumeMode: "Block" }),
      }),
    );
    const link = await deviceLinkOf(kubeconfig, "e2e-block-shared");
    links.push(link); // detached with the others (last test)
    expect(await inGuest(kubeconfig, RWX, rwxUid, WRITE)).toContain("WROTE=0");
    await eventually(
      async () => {
        const v = await vmiOrUndefined(kubeconfig, RWX);
        expect(v?.status?.conditions?.find((c) => c.type === "LiveMigratable")?.status).toBe("True");
        return true;
      },
      { ...CLUSTER_WAIT, what: `VMI ${RWX} to be LiveMigratable` },
    );
    const migrate = await virtctl(kubeconfig, ["migrate", RWX]);
    expect(migrate.code, migrate.stderr).toBe(0);
    // Ends at completed or failed, whichever comes first: a failed move fails here at once, with its state.
    const moved = await eventually(
      async () => {
        const v = await vmiOrUndefined(kubeconfig, RWX);
        const state = v?.status?.migrationState;
        return state?.completed || state?.failed ? v : undefined;
      },
      { timeoutMs: 100_000, intervalMs: 500, what: `the migration of ${RWX} to end` },
    );
    expect(moved?.status?.migrationState?.failed, JSON.stringify(moved?.status?.migrationState)).toBeFalsy();
    expect(moved?.status?.nodeName).not.toBe(before.status?.nodeName);
    const session = await inConsole(kubeconfig, RWX, READ_DATA);
    expect(session.stdout).toContain(`READ=${MARKER}`);
    // The claim's own bytes hold the marker: the guest wrote to the device itself, which both nodes opened.
    expect(firstSector(`${link}.img`).toString("latin1")).toMatch(new RegExp(`^${MARKER}\\n`));
    await kubectlOk(kubeconfig, ["delete", "vm", RWX, "--wait=false"]); // gone by the last test's wait
  }, 420_000);

  it("virtctl restart: the marker is on the claim's device, the ephemeral disk is its claim's again", async () => {
    const r = await virtctl(kubeconfig, ["restart", NAME]);
    expect(r.code, r.stderr).toBe(0);
    uid = (await running(kubeconfig, NAME, uid)).metadata.uid;
    const out = await inGuest(kubeconfig, NAME, uid, `${READ_DATA}; ${READ_GOLD}`);
    expect(out).toContain(`READ=${MARKER}`);
    expect(out).toContain("GOLD=END");
    // On the host: the data claim's file holds the marker (the device is the disk); the golden claim's bytes never
    // took the write (the device is the overlay's read-only base).
    expect(firstSector(`${links[0]}.img`).toString("latin1")).toMatch(new RegExp(`^${MARKER}\\n`));
    expect(firstSector(`${links[1]}.img`).equals(Buffer.alloc(512))).toBe(true);
  });

  it("deleting the VM and the claims detaches their loop devices", async () => {
    await kubectlOk(kubeconfig, ["delete", "vm", NAME, RWX, "--ignore-not-found", "--wait=true"]);
    await kubectlOk(kubeconfig, ["delete", "pvc", "e2e-block-data", "e2e-block-golden", "e2e-block-shared"]);
    await eventually(
      async () => {
        const files = new Set(loopDevices().values());
        for (const link of links) expect(files.has(`${link}.img`)).toBe(false);
        return true;
      },
      { ...CLUSTER_WAIT, timeoutMs: 90_000 },
    );
  });
});
