/**
 * Raw block volumes with the real kubectl and virtctl: Block claims of the local cluster's local-block class (a loop
 * device each) as the disks of the seed's demo VM (QEMU, emulated). The launcher pod maps them as volumeDevices at
 * /dev/<volume>, volumeStatus says volumeMode Block, and the guest's disks are the devices themselves: a marker
 * written to the claim's disk survives `virtctl restart`, while a write to an ephemeral volume over a Block claim (a
 * copy-on-write layer over its device) is gone after it and never reaches that claim. A ReadWriteOnce Block claim
 * keeps the VMI from migrating with KubeVirt's message. Deleting the claims detaches their loop devices. (A VM on a
 * ReadWriteMany Block claim migrates, the target opening the same device: left out here, a guest boot and a move
 * cost ~45 s more than this file's budget; the planning is unit-tested in virt-launcher and virt-controller.)
 */
import { execFileSync } from "node:child_process";
import { closeSync, openSync, readlinkSync, readSync } from "node:fs";
import { eventually } from "@kvt/testing";
import { describe, expect, inject, it } from "vitest";
import { getJson, kubectlOk, virtctl } from "../lib/cli.ts";
import { CLUSTER_WAIT } from "../lib/cluster-wait.ts";
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
import { launcherPods } from "../lib/objects.ts";

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
  let uid = "";
  let links: string[] = [];

  it("a VM on Block claims runs: volumeDevices at /dev/<volume>, volumeMode Block, a loop device per claim", async () => {
    await kubectlOk(kubeconfig, ["create", "-f", "-"], claim("e2e-block-data", "ReadWriteOnce", BLOCK));
    await kubectlOk(kubeconfig, ["create", "-f", "-"], claim("e2e-block-golden", "ReadWriteOnce", BLOCK));
    const vm = blockVm(NAME, "e2e-block-data", "e2e-block-golden");
    await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(vm));
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
    await kubectlOk(kubeconfig, ["delete", "vm", NAME, "--wait=true"]);
    await kubectlOk(kubeconfig, ["delete", "pvc", "e2e-block-data", "e2e-block-golden"]);
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
