import { describe, expect, it } from "vitest";
import type { MachineSpec } from "../machine.ts";
import { kernelCmdline, qemuArgs } from "./qemu-args.ts";

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
  it("emulates (tcg) with the spec's memory, vCPUs, kernel, initrd, UUID and the seed as a virtio drive", () => {
    const args = qemuArgs(
      spec,
      { qmpSocket: "/w/qmp.sock", seedImage: "/w/cidata.iso" },
      { machineType: "pc", incoming: false },
    );
    expect(after(args, "-accel")).toBe("tcg");
    expect(args).not.toContain("kvm");
    expect(after(args, "-M")).toBe("pc");
    expect(after(args, "-m")).toBe("256M");
    expect(after(args, "-smp")).toBe("2");
    expect(after(args, "-kernel")).toBe("/img/vmlinuz");
    expect(after(args, "-initrd")).toBe("/img/initrd.img");
    expect(after(args, "-append")).toBe("console=ttyS0 quiet");
    expect(after(args, "-uuid")).toBe(spec.firmwareUuid);
    expect(after(args, "-qmp")).toBe("unix:/w/qmp.sock,server=on,wait=off");
    expect(after(args, "-drive")).toMatch(/^file=\/w\/cidata.iso,format=raw,readonly=on/);
    expect(after(args, "-device")).toBe("virtio-blk-pci,drive=cidata");
    expect(args).toContain("-S");
  });

  it("starts a migration target with -incoming defer instead of -S, and microvm uses virtio-mmio", () => {
    const args = qemuArgs(spec, { qmpSocket: "/q", seedImage: "/s" }, { machineType: "microvm", incoming: true });
    expect(after(args, "-incoming")).toBe("defer");
    expect(args).not.toContain("-S");
    expect(after(args, "-device")).toBe("virtio-blk-device,drive=cidata");
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

describe("kernelCmdline()", () => {
  it.each([
    ["quiet", "console=ttyS0 quiet"],
    ["console=hvc0 quiet", "console=hvc0 quiet"],
    ["", "console=ttyS0"],
  ])("%j -> %j", (input, want) => {
    expect(kernelCmdline(input)).toBe(want);
  });
});

describe("installMissing()", () => {
  it("names the one command to run when a tool is missing and we are not root", async () => {
    const { installMissing, MissingHostToolError } = await import("./host-tools.ts");
    const err = await installMissing([{ bin: "kvt-no-such-qemu", pkg: "qemu-system-x86" }], false).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(MissingHostToolError);
    expect((err as Error).message).toMatch(
      /kvt-no-such-qemu is not installed; run: sudo apt-get install -y qemu-system-x86/,
    );
  });
  it("is satisfied when the tools exist", async () => {
    const { installMissing } = await import("./host-tools.ts");
    await expect(installMissing([{ bin: "sh", pkg: "dash" }], false)).resolves.toBeUndefined();
  });
});

describe("diskArgs()", () => {
  it("maps each disk to a file and raw blockdev and a virtio-blk-pci device, with KubeVirt's cache modes", () => {
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
    const args = qemuArgs(
      { ...spec, disks },
      { qmpSocket: "/w/q", seedImage: "/w/seed" },
      { machineType: "pc", incoming: false },
    );
    const blockdevs = args.flatMap((a, i) => (a === "-blockdev" ? [args[i + 1]] : []));
    expect(blockdevs).toEqual([
      "driver=file,node-name=file0,filename=/d/root,,1.img,cache.direct=on,aio=native",
      "driver=raw,node-name=disk0,file=file0",
      "driver=file,node-name=file1,filename=/d/data.img,cache.direct=off,aio=threads,read-only=on",
      "driver=raw,node-name=disk1,file=file1,read-only=on",
    ]);
    const devices = args.flatMap((a, i) => (a === "-device" ? [args[i + 1]] : []));
    expect(devices).toEqual([
      "virtio-blk-pci,drive=disk0,id=ua-root,write-cache=on",
      "virtio-blk-pci,drive=disk1,id=ua-data,write-cache=off,serial=S1,bootindex=2",
      "virtio-blk-pci,drive=cidata",
    ]);
    expect(() =>
      qemuArgs({ ...spec, disks }, { qmpSocket: "/w/q" }, { machineType: "microvm", incoming: false }),
    ).toThrow(/pc machine type/);
  });
});
