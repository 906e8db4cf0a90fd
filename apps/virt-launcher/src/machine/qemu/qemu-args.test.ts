import { describe, expect, it } from "vitest";
import type { MachineSpec } from "../machine.ts";
import { diskArgs, kernelCmdline, qemuArgs } from "./qemu-args.ts";

const spec: MachineSpec = {
  vmiKey: "default/vm-cirros",
  memoryBytes: 256 * 1024 * 1024,
  vcpus: 2,
  boot: { kernelPath: "/img/vmlinuz", initrdPath: "/img/initrd.img", cmdline: "quiet", pvmSafe: false },
  firmwareUuid: "5d307ca9-b3ef-428c-8861-06e72d69f223",
  workDir: "/w",
};

function after(args: string[], flag: string): string | undefined {
  return args[args.indexOf(flag) + 1];
}

describe("qemuArgs()", () => {
  it("emulates (tcg) with the spec's memory, vCPUs, kernel, initrd, UUID and its disks", () => {
    const cidata = { name: "cloudinitdisk", path: "/w/cloud-init/cloudinitdisk.iso", readOnly: true } as const;
    const args = qemuArgs(
      { ...spec, disks: [{ ...cidata, kind: "cloudInitNoCloud", shared: true }] },
      { qmpSocket: "/w/qmp.sock" },
      { machineType: "pc", incoming: false },
    );
    // A small guest (this one, 256 MiB, is at the limit) gets a 32 MiB translation cache; a larger one QEMU's.
    expect(after(args, "-accel")).toBe("tcg,tb-size=32");
    const large = qemuArgs(
      { ...spec, memoryBytes: 512 << 20 },
      { qmpSocket: "/q" },
      { machineType: "pc", incoming: false },
    );
    expect(after(large, "-accel")).toBe("tcg");
    expect(args).not.toContain("kvm");
    expect(after(args, "-M")).toBe("pc");
    expect(after(args, "-m")).toBe("256M");
    expect(after(args, "-smp")).toBe("2");
    expect(after(args, "-kernel")).toBe("/img/vmlinuz");
    expect(after(args, "-initrd")).toBe("/img/initrd.img");
    expect(after(args, "-append")).toBe("console=ttyS0 quiet");
    expect(after(args, "-uuid")).toBe(spec.firmwareUuid);
    expect(after(args, "-qmp")).toBe("unix:/w/qmp.sock,server=on,wait=off");
    expect(after(args, "-drive")).toMatch(/^if=none,id=disk0,file=\/w\/cloud-init\/cloudinitdisk.iso,format=raw,/);
    expect(after(args, "-device")).toBe("virtio-blk-pci,drive=disk0,id=ua-cloudinitdisk,write-cache=off");
    expect(args).toContain("-S");
  });

  it("runs the guest on KVM with the host's CPU model when asked (benches), TCG otherwise", () => {
    const kvm = qemuArgs(spec, { qmpSocket: "/q" }, { machineType: "pc", incoming: false, accel: "kvm" });
    expect(after(kvm, "-accel")).toBe("kvm");
    expect(after(kvm, "-cpu")).toBe("host");
    expect(kvm.filter((a) => a === "-accel")).toHaveLength(1);
    const tcg = qemuArgs(spec, { qmpSocket: "/q" }, { machineType: "pc", incoming: false, accel: "tcg" });
    expect(after(tcg, "-accel")).toBe("tcg,tb-size=32");
    expect(tcg).not.toContain("-cpu");
  });

  it("starts a migration target with -incoming defer instead of -S", () => {
    const args = qemuArgs(spec, { qmpSocket: "/q" }, { machineType: "microvm", incoming: true });
    expect(after(args, "-incoming")).toBe("defer");
    expect(after(args, "-M")).toBe("microvm");
    expect(args).not.toContain("-S");
  });

  it.each([
    [{ vcpus: 0 }, /vCPU/],
    [{ memoryBytes: 1024 }, /below 16 MiB/],
    [{ firmwareUuid: "not-a-uuid" }, /invalid firmware UUID/],
  ])("rejects %o", (patch, message) => {
    expect(() => qemuArgs({ ...spec, ...patch }, { qmpSocket: "/q" }, { machineType: "pc", incoming: false })).toThrow(
      message,
    );
  });
});

describe("qemuArgs() NICs", () => {
  it("puts each NIC on its wired tap as virtio-net-pci with the spec's MAC; refuses them on microvm", () => {
    const nics = [{ tap: "tap0", mac: "02:11:22:33:44:55" }];
    const args = qemuArgs({ ...spec, nics }, { qmpSocket: "/w/qmp.sock" }, { machineType: "pc", incoming: false });
    expect(after(args, "-netdev")).toBe("tap,id=net0,ifname=tap0,script=no,downscript=no,vhost=off");
    expect(args).toContain("virtio-net-pci,netdev=net0,mac=02:11:22:33:44:55");
    const e1000 = qemuArgs(
      { ...spec, nics: [{ ...nics[0], model: "e1000" }] },
      { qmpSocket: "/w/qmp.sock" },
      { machineType: "pc", incoming: false },
    );
    expect(e1000).toContain("e1000,netdev=net0,mac=02:11:22:33:44:55");
    // vhost-net as libvirt picks it: auto (the default) where /dev/vhost-net opens, on always, off never.
    const pc = { machineType: "pc" as const, incoming: false };
    const netdev = (vhost: "off" | "auto" | "on" | undefined, vhostNet: boolean) =>
      after(qemuArgs({ ...spec, nics: [{ ...nics[0], vhost }] }, { qmpSocket: "/q" }, { ...pc, vhostNet }), "-netdev");
    expect(netdev(undefined, true)).toMatch(/,vhost=on$/);
    expect(netdev("auto", false)).toMatch(/,vhost=off$/);
    expect(netdev("on", false)).toMatch(/,vhost=on$/);
    expect(netdev("off", true)).toMatch(/,vhost=off$/);
    expect(() =>
      qemuArgs({ ...spec, nics }, { qmpSocket: "/w/qmp.sock" }, { machineType: "microvm", incoming: false }),
    ).toThrow(/NICs need the pc machine type/);
  });
});

describe("kernelCmdline()", () => {
  it.each([
    ["quiet", "console=ttyS0 quiet"],
    ["console=hvc0 quiet", "console=hvc0 quiet"],
    ["", "console=ttyS0"],
  ])("%j -> %j", (input, want) => {
    expect(kernelCmdline(input)).toBe(want);
  });
});

describe("diskArgs()", () => {
  it("maps each disk to a named -drive and a virtio-blk-pci device, with KubeVirt's cache modes", () => {
    const disks = [
      {
        name: "root",
        path: "/d/root,1.img",
        readOnly: false,
        kind: "emptyDisk",
        shared: false,
        cache: "none",
        io: "native",
      },
      {
        name: "data",
        path: "/d/data.img",
        readOnly: true,
        kind: "persistentVolumeClaim",
        shared: true,
        serial: "S1",
        bootOrder: 2,
      },
    ] as const;
    const args = qemuArgs({ ...spec, disks }, { qmpSocket: "/w/q" }, { machineType: "pc", incoming: false });
    const drives = args.flatMap((a, i) => (a === "-drive" ? [args[i + 1]] : []));
    expect(drives).toEqual([
      "if=none,id=disk0,file=/d/root,,1.img,format=raw,cache.direct=on,aio=native",
      "if=none,id=disk1,file=/d/data.img,format=raw,cache.direct=off,aio=threads,read-only=on",
    ]);
    const overlay = qemuArgs(
      { ...spec, disks: [{ ...disks[0], format: "qcow2" }] },
      { qmpSocket: "/w/q" },
      { machineType: "pc", incoming: false },
    );
    expect(overlay).toContain("if=none,id=disk0,file=/d/root,,1.img,format=qcow2,cache.direct=on,aio=native");
    const devices = args.flatMap((a, i) => (a === "-device" ? [args[i + 1]] : []));
    expect(devices).toEqual([
      "virtio-blk-pci,drive=disk0,id=ua-root,write-cache=on",
      "virtio-blk-pci,drive=disk1,id=ua-data,write-cache=off,serial=S1,bootindex=2",
    ]);
    expect(() =>
      qemuArgs({ ...spec, disks }, { qmpSocket: "/w/q" }, { machineType: "microvm", incoming: false }),
    ).toThrow(/pc machine type/);
  });
});

describe("diskArgs() of a raw block device", () => {
  it("opens a Block claim's device with the host_device protocol (libvirt's type='block' source)", () => {
    const disk = {
      name: "data",
      path: "/dev/loop7",
      block: true,
      readOnly: false,
      kind: "persistentVolumeClaim",
      shared: true,
    } as const;
    expect(diskArgs(disk, 0)).toEqual([
      "-drive",
      "if=none,id=disk0,file.driver=host_device,file.filename=/dev/loop7,format=raw,cache.direct=off,aio=threads",
      "-device",
      "virtio-blk-pci,drive=disk0,id=ua-data,write-cache=off",
    ]);
  });
});

describe("diskArgs() on sata and scsi", () => {
  it("puts sata disks and CD-ROMs on an AHCI controller, one port each, and scsi disks on virtio-scsi LUNs", () => {
    const base = { readOnly: false, kind: "emptyDisk", shared: false } as const;
    const disks = [
      { ...base, name: "v", path: "/d/v.img" },
      { ...base, name: "s1", path: "/d/s1.img", bus: "sata" },
      { ...base, name: "cd", path: "/d/ci.iso", bus: "sata", cdrom: true, readOnly: true },
      { ...base, name: "q", path: "/d/q.img", bus: "scsi" },
    ] as const;
    const args = qemuArgs({ ...spec, disks }, { qmpSocket: "/w/q" }, { machineType: "pc", incoming: false });
    const devices = args.flatMap((a, i) => (a === "-device" ? [args[i + 1]] : []));
    expect(devices).toEqual([
      "ahci,id=sata0",
      "virtio-scsi-pci,id=scsi0",
      "virtio-blk-pci,drive=disk0,id=ua-v,write-cache=off",
      "ide-hd,bus=sata0.0,drive=disk1,id=ua-s1,write-cache=off",
      "ide-cd,bus=sata0.1,drive=disk2,id=ua-cd,write-cache=off",
      "scsi-hd,bus=scsi0.0,lun=0,drive=disk3,id=ua-q,write-cache=off",
    ]);
    expect(args).toContain("if=none,id=disk2,file=/d/ci.iso,format=raw,cache.direct=off,aio=threads,read-only=on");
    // A read-only ISO on a sata hard disk (cloud-init's default bus) stays writable: QEMU refuses a read-only ide-hd.
    const ro = qemuArgs(
      { ...spec, disks: [{ ...base, name: "ci", path: "/d/ci.iso", bus: "sata", readOnly: true }] },
      { qmpSocket: "/w/q" },
      { machineType: "pc", incoming: false },
    );
    expect(ro).toContain("if=none,id=disk0,file=/d/ci.iso,format=raw,cache.direct=off,aio=threads");
  });
});
