/**
 * Block claims as disks: the raw device at /dev/<volume> (handed over by the pod's volumeDevices) is the disk itself,
 * on both backends, and an ephemeral volume's base. Planning needs any block device node of this machine; sizes and
 * write layers need a real one (a loop device over a temp file: root).
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { VirtualMachineInstance } from "@kvt/api";
import { blockDeviceBytes } from "@kvt/vmm";
import { afterAll, describe, expect, it } from "vitest";
import { makeWriteLayers } from "../volumes/container-disk-layer.ts";
import { qemuImg } from "../volumes/host-qemu-img.ts";
import { blockDeviceOf, copiedOnMigration, planDisks, prepareDisks } from "./disks.ts";
import { imageStoreResolver } from "./image-store.ts";

const root = mkdtempSync(join(tmpdir(), "kvt-block-disks-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const ephemeral = join(root, "ephemeral");
mkdirSync(ephemeral, { recursive: true });

/** Some block device node of this machine (e.g. /dev/loop0: the node exists whether or not it is attached). */
const someBlockDevice = readdirSync("/dev")
  .map((n) => join("/dev", n))
  .find((p) => {
    try {
      return statSync(p).isBlockDevice();
    } catch {
      return false;
    }
  });

function vmiWith(volumes: unknown[], accessModes: string[] = ["ReadWriteOnce"]): VirtualMachineInstance {
  return {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachineInstance",
    metadata: { name: "vm", namespace: "ns", uid: "u1" },
    spec: {
      domain: { devices: { disks: [{ name: "data", serial: "D1" }] }, memory: { guest: "64Mi" } },
      volumes,
    },
    status: {
      volumeStatus: [
        {
          name: "data",
          target: "vda",
          persistentVolumeClaimInfo: { accessModes, volumeMode: "Block", capacity: { storage: "16Mi" } },
        },
      ],
    },
  } as unknown as VirtualMachineInstance;
}

const ctxWith = (mounts: { mountPath: string; hostPath: string }[]) => ({
  resolveImage: imageStoreResolver(join(root, "store")),
  mounts: [{ mountPath: "/var/run/kubevirt-ephemeral-disks", hostPath: ephemeral }, ...mounts],
  workDir: join(root, "work"),
});

describe.runIf(someBlockDevice !== undefined)("planDisks() with a Block claim", () => {
  const device = someBlockDevice!;
  const pvc = [{ name: "data", persistentVolumeClaim: { claimName: "raw" } }];

  it("uses the device at /dev/<volume> as the disk: no disk.img, nothing created, shared only for RWX", async () => {
    const causes: { field: string; message: string }[] = [];
    const ctx = ctxWith([{ mountPath: "/dev/data", hostPath: device }]);
    const [disk] = planDisks(vmiWith(pvc), ctx, causes);
    expect(causes).toEqual([]);
    expect(disk).toEqual({
      name: "data",
      path: device,
      block: true,
      readOnly: false,
      serial: "D1",
      kind: "persistentVolumeClaim",
      shared: false,
    });
    expect(copiedOnMigration(disk)).toBe(true); // RWO: not shared (and the VMI is not live-migratable)
    expect(await prepareDisks([disk])).toEqual([]);
    const [rwx] = planDisks(vmiWith(pvc, ["ReadWriteMany"]), ctx, causes);
    expect(rwx).toMatchObject({ block: true, shared: true });
    expect(copiedOnMigration(rwx)).toBe(false);
    const ro = [{ name: "data", persistentVolumeClaim: { claimName: "raw", readOnly: true } }];
    expect(planDisks(vmiWith(ro), ctx, causes)[0]).toMatchObject({ block: true, readOnly: true });
  });

  it("takes only a device the process-kubelet handed over: without the /dev/<volume> entry it is a filesystem claim", () => {
    const dir = join(root, "pv");
    const ctx = ctxWith([{ mountPath: "/var/run/kubevirt-private/vmi-disks/data", hostPath: dir }]);
    expect(blockDeviceOf("data", ctx.mounts)).toBeUndefined();
    const [disk] = planDisks(vmiWith(pvc), ctx, []);
    expect(disk).toMatchObject({ path: join(dir, "disk.img"), requireDir: dir });
    expect(disk?.block).toBeUndefined();
    // A mapped path that is not a block device is not one either (KubeVirt: "found ..., but it's not a block device").
    const file = join(root, "plain");
    writeFileSync(file, "");
    expect(blockDeviceOf("data", [{ mountPath: "/dev/data", hostPath: file, readOnly: false }])).toBeUndefined();
  });

  it("refuses a device that is gone when the disks are prepared", async () => {
    const gone = {
      name: "data",
      path: join(root, "nope"),
      block: true,
      readOnly: false,
      kind: "persistentVolumeClaim",
      shared: false,
    } as const;
    expect(await prepareDisks([gone])).toEqual([
      { field: "volume data", message: `${join(root, "nope")} is not a block device` },
    ]);
  });

  it("puts an ephemeral volume's layer over the device (the claim's volumeDevice) instead of a disk.img", () => {
    const ctx = ctxWith([{ mountPath: "/dev/data", hostPath: device }]);
    const eph = [{ name: "data", ephemeral: { persistentVolumeClaim: { claimName: "golden" } } }];
    const [disk] = planDisks(vmiWith(eph), ctx, []);
    expect(disk).toMatchObject({
      kind: "ephemeral",
      copyFrom: device,
      path: join(ephemeral, "ephemeral-volumes", "data.img"),
      fresh: true,
      shared: false,
    });
    expect(disk?.requireDir).toBeUndefined();
  });
});

describe.runIf(process.getuid?.() === 0)("a real Block claim device (loop device, root)", () => {
  it("has the device's size, and an ephemeral layer over it for either backend leaves it unwritten", async () => {
    const file = join(root, "backing.img");
    writeFileSync(file, Buffer.alloc(4 << 20, 0x5a));
    const device = execFileSync("losetup", ["--find", "--show", file], { encoding: "utf8" }).trim();
    try {
      expect(blockDeviceBytes(device)).toBe(4 << 20);
      const base = {
        name: "data",
        path: join(ephemeral, "ephemeral-volumes", "data.img"),
        readOnly: false,
        kind: "ephemeral",
        shared: false,
        copyFrom: device,
        fresh: true,
      } as const;
      const [native] = await makeWriteLayers([base], "native");
      expect(native).toMatchObject({ base: device, path: base.path });
      expect(statSync(base.path).size).toBe(4 << 20);
      const [qemu] = await makeWriteLayers([base], "qemu");
      expect(qemu).toMatchObject({ format: "qcow2", path: base.path });
      const info = JSON.parse(qemuImg("info", "--output=json", "-U", base.path)) as Record<string, unknown>;
      expect(info).toMatchObject({
        "backing-filename": device,
        "backing-filename-format": "raw",
        "virtual-size": 4 << 20,
      });
      const [readOnly] = await makeWriteLayers([{ ...base, readOnly: true }], "qemu");
      expect(readOnly).toMatchObject({ path: device, block: true, readOnly: true });
      expect(existsSync(device)).toBe(true);
    } finally {
      execFileSync("losetup", ["--detach", device]);
    }
  });
});
