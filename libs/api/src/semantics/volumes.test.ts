import { describe, expect, it } from "vitest";
import type { VirtualMachineInstance } from "../types.ts";
import { claimInfo, diskTargets, volumeStatusOf, volumesMigrationBlocker } from "./volumes.ts";

function vmi(volumes: unknown[], disks: unknown[], volumeStatus?: unknown[]): VirtualMachineInstance {
  return {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachineInstance",
    metadata: { name: "v", namespace: "ns" },
    spec: { domain: { devices: { disks } }, volumes },
    ...(volumeStatus ? { status: { volumeStatus } } : {}),
  } as VirtualMachineInstance;
}

describe("diskTargets", () => {
  it("names virtio disks vd*, sata and scsi disks and CD-ROMs sd*, in order", () => {
    const t = diskTargets([
      { name: "root", disk: { bus: "virtio" } },
      { name: "cd", cdrom: {} },
      { name: "data" },
      { name: "s", disk: { bus: "scsi" } },
    ] as never);
    expect([...t]).toEqual([
      ["root", "vda"],
      ["cd", "sda"],
      ["data", "vdb"],
      ["s", "sdb"],
    ]);
  });

  it("goes on past z as the kernel does", () => {
    const disks = Array.from({ length: 28 }, (_, i) => ({ name: `d${i}` }));
    const t = diskTargets(disks);
    expect(t.get("d25")).toBe("vdz");
    expect(t.get("d26")).toBe("vdaa");
    expect(t.get("d27")).toBe("vdab");
  });
});

describe("volumeStatusOf", () => {
  it("lists the volumes disks use, with the claim's info where the claim exists", () => {
    const v = vmi(
      [
        { name: "root", containerDisk: { image: "x" } },
        { name: "data", persistentVolumeClaim: { claimName: "pvc1" } },
        { name: "missing", persistentVolumeClaim: { claimName: "nope" } },
        { name: "unused", emptyDisk: { capacity: "1Gi" } },
      ],
      [{ name: "root" }, { name: "data" }, { name: "missing" }],
    );
    const info = claimInfo({
      metadata: { name: "pvc1" },
      spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
      status: { accessModes: ["ReadWriteOnce"], capacity: { storage: "1Gi" } },
    });
    expect(volumeStatusOf(v, (n) => (n === "pvc1" ? info : undefined))).toEqual([
      { name: "root", target: "vda" },
      {
        name: "data",
        target: "vdb",
        persistentVolumeClaimInfo: {
          claimName: "pvc1",
          accessModes: ["ReadWriteOnce"],
          volumeMode: "Filesystem",
          capacity: { storage: "1Gi" },
          requests: { storage: "1Gi" },
          filesystemOverhead: "0.055",
        },
      },
      { name: "missing", target: "vdc" },
    ]);
  });
});

describe("volumesMigrationBlocker", () => {
  const disks = [{ name: "data" }];
  it("refuses a ReadWriteOnce claim with KubeVirt's message", () => {
    const v = vmi([{ name: "data", persistentVolumeClaim: { claimName: "pvc1" } }], disks, [
      { name: "data", target: "vda", persistentVolumeClaimInfo: { accessModes: ["ReadWriteOnce"] } },
    ]);
    expect(volumesMigrationBlocker(v)).toBe(
      "cannot migrate VMI: PVC pvc1 is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)",
    );
  });

  it("refuses a claim whose access modes are unknown", () => {
    const v = vmi([{ name: "data", persistentVolumeClaim: { claimName: "pvc1" } }], disks);
    expect(volumesMigrationBlocker(v)).toMatch(/^cannot migrate VMI: Unable to determine if PVC pvc1 is shared/);
  });

  it("allows ReadWriteMany claims and local disks, refuses a non-shared hostDisk", () => {
    const rwx = vmi(
      [
        { name: "data", persistentVolumeClaim: { claimName: "pvc1" } },
        { name: "scratch", emptyDisk: { capacity: "1Gi" } },
        { name: "root", containerDisk: { image: "x" } },
      ],
      disks,
      [{ name: "data", target: "vda", persistentVolumeClaimInfo: { accessModes: ["ReadWriteMany"] } }],
    );
    expect(volumesMigrationBlocker(rwx)).toBeUndefined();
    const host = vmi([{ name: "data", hostDisk: { path: "/x/disk.img", type: "Disk" } }], disks);
    expect(volumesMigrationBlocker(host)).toBe("cannot migrate VMI with non-shared HostDisk");
    const shared = vmi([{ name: "data", hostDisk: { path: "/x/disk.img", type: "Disk", shared: true } }], disks);
    expect(volumesMigrationBlocker(shared)).toBeUndefined();
  });
});
