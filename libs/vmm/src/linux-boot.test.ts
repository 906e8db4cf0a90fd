import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { VmmError } from "./errors.ts";
import { gpa } from "./gpa.ts";
import { hasKvm } from "./kvm.ts";
import { joinInitrd, linuxCmdline, parseLinuxBoot } from "./linux-boot.ts";
import { noCloudSeedInitrd } from "./linux-seed.ts";
import { type NativeVm, nativeAddon } from "./native.ts";
import { Vm } from "./vm.ts";
import { parseVmOptions } from "./vm-options.ts";

/**
 * A minimal ELF64 x86-64 executable shaped like a vmlinux: PT_LOAD segments given as [paddr, file bytes, memory
 * bytes], entry `entry` (physical, as a vmlinux's phys_startup_64), the virtual addresses far from the physical ones.
 */
function miniVmlinux(entry: number, segments: readonly [number, Buffer, number][]): Buffer {
  const phoff = 64;
  let offset = phoff + 56 * segments.length;
  const header = Buffer.alloc(offset);
  Buffer.from([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1]).copy(header, 0);
  header.writeUInt16LE(2, 16); // ET_EXEC
  header.writeUInt16LE(62, 18); // EM_X86_64
  header.writeUInt32LE(1, 20);
  header.writeBigUInt64LE(BigInt(entry), 24);
  header.writeBigUInt64LE(BigInt(phoff), 32);
  header.writeUInt16LE(64, 52);
  header.writeUInt16LE(56, 54);
  header.writeUInt16LE(segments.length, 56);
  segments.forEach(([paddr, bytes, memBytes], i) => {
    const ph = phoff + 56 * i;
    header.writeUInt32LE(1, ph); // PT_LOAD
    header.writeUInt32LE(7, ph + 4);
    header.writeBigUInt64LE(BigInt(offset), ph + 8);
    header.writeBigUInt64LE(0xffffffff80000000n + BigInt(paddr), ph + 16); // p_vaddr: the kernel map
    header.writeBigUInt64LE(BigInt(paddr), ph + 24);
    header.writeBigUInt64LE(BigInt(bytes.length), ph + 32);
    header.writeBigUInt64LE(BigInt(memBytes), ph + 40);
    offset += bytes.length;
  });
  return Buffer.concat([header, ...segments.map(([, bytes]) => bytes)]);
}

describe("linux boot options", () => {
  it("adds console=ttyS0 only when the command line names no console", () => {
    expect(linuxCmdline("")).toBe("console=ttyS0");
    expect(linuxCmdline(" quiet panic=-1 ")).toBe("quiet panic=-1 console=ttyS0");
    expect(linuxCmdline("console=hvc0 quiet")).toBe("console=hvc0 quiet");
  });

  it("validates the boot option and refuses kernel together with boot", () => {
    expect(parseLinuxBoot({ kind: "linux", kernelPath: "/k" }).cmdline).toBe("console=ttyS0");
    expect(() => parseLinuxBoot({ kind: "linux", kernelPath: "" })).toThrow(TypeError);
    const uuid = "5d307ca9-b3ef-428c-8861-06e72d69f223";
    expect(parseLinuxBoot({ kind: "linux", kernelPath: "/k", uuid }).uuid).toBe(uuid);
    expect(() => parseLinuxBoot({ kind: "linux", kernelPath: "/k", uuid: "not-a-uuid" })).toThrow(/boot.uuid/);
    expect(() => parseLinuxBoot({ kind: "linux", kernelPath: "/k", cmdline: "x".repeat(3000) })).toThrow(RangeError);
    expect(() =>
      parseVmOptions({ memoryBytes: 64 << 20, kernel: { path: "/e" }, boot: { kind: "linux", kernelPath: "/k" } }),
    ).toThrow(/not both/);
    expect(parseVmOptions({ memoryBytes: 64 << 20, boot: { kind: "linux", kernelPath: "/k" } }).boot?.kind).toBe(
      "linux",
    );
  });

  it("pads each initramfs segment to 4 bytes", () => {
    const joined = joinInitrd([new Uint8Array([1, 2, 3]), new Uint8Array([4, 5, 6, 7, 8])]);
    expect([...joined]).toEqual([1, 2, 3, 0, 4, 5, 6, 7, 8, 0, 0, 0]);
  });

  it("writes the NoCloud seed as a newc archive under run/cidata", () => {
    const cpio = noCloudSeedInitrd({ metaData: "instance-id: a\n", userData: "#!/bin/sh\necho x\n" });
    const text = Buffer.from(cpio).toString("latin1");
    expect(text.startsWith("070701")).toBe(true);
    expect(cpio.length % 4).toBe(0);
    for (const name of ["run\0", "run/cidata\0", "run/cidata/meta-data\0", "run/cidata/user-data\0", "TRAILER!!!\0"]) {
      expect(text).toContain(name);
    }
    const at = text.indexOf("run/cidata/user-data\0");
    const header = text.slice(at - 110, at);
    expect(Number.parseInt(header.slice(6 + 6 * 8, 6 + 7 * 8), 16)).toBe("#!/bin/sh\necho x\n".length);
  });

  it.skipIf(!hasKvm())("refuses a broken vmlinux (ELF) and a file that is neither it nor a bzImage, by name", () => {
    if (!hasKvm()) process.stderr.write("linux-boot.test.ts: /dev/kvm missing, the loader checks are SKIPPED\n");
    const dir = mkdtempSync(join(tmpdir(), "kvt-vmlinux-"));
    try {
      const boot = (file: string, bytes: Buffer) => {
        writeFileSync(join(dir, file), bytes);
        return () => Vm.create({ memoryBytes: 64 << 20, boot: { kind: "linux", kernelPath: join(dir, file) } });
      };
      const truncatedElf = Buffer.concat([Buffer.from([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1]), Buffer.alloc(20)]);
      expect(boot("vmlinux", truncatedElf)).toThrow(VmmError);
      expect(boot("vmlinux", truncatedElf)).toThrow(/vmlinux/);
      expect(boot("vmlinuz", Buffer.alloc(4096, 1))).toThrow(/bzimage/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.skipIf(!hasKvm())(
    "loads a vmlinux's segments at their physical addresses and writes a setup header of its own",
    () => {
      const dir = mkdtempSync(join(tmpdir(), "kvt-vmlinux-"));
      try {
        const text = Buffer.alloc(0x3000, 0xf4);
        const data = Buffer.from("kvt data segment");
        writeFileSync(
          join(dir, "vmlinux"),
          miniVmlinux(0x1000000, [
            [0x1000000, text, text.length],
            [0x1400000, data, 0x2000], // the rest of its memory size is bss: zeroed
          ]),
        );
        const initrd = Buffer.from("070701 an initramfs, as far as the loader cares".padEnd(64)); // 4-byte multiple
        writeFileSync(join(dir, "initrd.img"), initrd);
        const vm = Vm.create({
          memoryBytes: 64 << 20,
          boot: {
            kind: "linux",
            kernelPath: join(dir, "vmlinux"),
            initrdPath: join(dir, "initrd.img"),
            cmdline: "ws=1",
          },
        });
        try {
          expect(Buffer.from(vm.readMemory(gpa(0x1000000), text.length)).equals(text)).toBe(true);
          expect(Buffer.from(vm.readMemory(gpa(0x1400000), data.length)).equals(data)).toBe(true);
          expect(vm.readMemory(gpa(0x1400000 + data.length), 0x2000 - data.length).every((b) => b === 0)).toBe(true);
          const zp = Buffer.from(vm.readMemory(gpa(0x7000), 4096)); // the zero page (boot_params)
          expect(zp.readUInt16LE(0x1fe)).toBe(0xaa55); // boot_flag
          expect(zp.toString("latin1", 0x202, 0x206)).toBe("HdrS");
          expect(zp.readUInt16LE(0x206)).toBeGreaterThanOrEqual(0x020c); // version: 64-bit entry, cmd_line_ptr
          expect(zp[0x210]).toBe(0xff); // type_of_loader: undefined
          expect(zp[0x211] & 1).toBe(1); // loadflags LOADED_HIGH
          const cmdlinePtr = zp.readUInt32LE(0x228);
          const cmdline = Buffer.from(vm.readMemory(gpa(cmdlinePtr), 256));
          expect(cmdline.toString("latin1", 0, cmdline.indexOf(0))).toMatch(/^ws=1( |$)/);
          const ramdisk = zp.readUInt32LE(0x218);
          expect(zp.readUInt32LE(0x21c)).toBe(initrd.length);
          expect(ramdisk).toBeGreaterThanOrEqual(0x1400000 + 0x2000); // above the kernel's end
          expect(Buffer.from(vm.readMemory(gpa(ramdisk), initrd.length)).equals(initrd)).toBe(true);
          expect(zp[0x1e8]).toBeGreaterThan(0); // e820_entries
        } finally {
          vm.stop();
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  it.skipIf(!hasKvm())("refuses a vmlinux whose entry or segments do not fit, with a typed error", () => {
    const dir = mkdtempSync(join(tmpdir(), "kvt-vmlinux-"));
    try {
      const boot = (bytes: Buffer) => () => {
        writeFileSync(join(dir, "vmlinux"), bytes);
        Vm.create({ memoryBytes: 64 << 20, boot: { kind: "linux", kernelPath: join(dir, "vmlinux") } }).stop();
      };
      const code = Buffer.alloc(16, 0xf4);
      expect(boot(miniVmlinux(0x2000000, [[0x1000000, code, 16]]))).toThrow(/entry point outside/);
      expect(boot(miniVmlinux(0x8000000, [[0x8000000, code, 16]]))).toThrow(/does not fit in guest RAM/); // 128 MiB > 64
      expect(boot(miniVmlinux(0x1000, [[0x1000, code, 16]]))).toThrow(/vmlinux.*1 MiB/); // over the boot tables
      const cut = miniVmlinux(0x1000000, [[0x1000000, code, 16]]).subarray(0, 100);
      expect(boot(cut)).toThrow(VmmError);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.skipIf(!hasKvm())("creates virtio-blk disks from boot.disks; the native side checks their shape", () => {
    const dir = mkdtempSync(join(tmpdir(), "kvt-disks-"));
    try {
      const code = Buffer.alloc(16, 0xf4);
      writeFileSync(join(dir, "vmlinux"), miniVmlinux(0x1000000, [[0x1000000, code, 16]]));
      writeFileSync(join(dir, "rw.img"), Buffer.alloc(1 << 20));
      writeFileSync(join(dir, "ro.img"), Buffer.alloc(4096));
      const vm = Vm.create({
        memoryBytes: 64 << 20,
        boot: {
          kind: "linux",
          kernelPath: join(dir, "vmlinux"),
          disks: [
            { path: join(dir, "rw.img"), serial: "kvt-disk-0" },
            { path: join(dir, "ro.img"), readOnly: true },
          ],
        },
      });
      try {
        expect(vm.stats()).toMatchObject({ diskRequests: 0, diskReadBytes: 0, diskWriteBytes: 0, diskErrors: 0 });
      } finally {
        vm.stop();
      }
      expect(vm.stats()).toMatchObject({ state: "stopped", diskBroken: 0 });
      // Past the TypeScript validation, C++ still refuses a malformed disks argument (a TypeError, no machine).
      const Ctor = nativeAddon().NativeVm as new (...args: unknown[]) => NativeVm;
      expect(() => new Ctor(64 << 20, 1, false, () => undefined, true, [["/x", "rw", ""]])).toThrow(
        /disks must be \[\[path: string, readOnly: boolean, serial: string, copy\?: boolean\], \.\.\.\]/,
      );
      expect(() => new Ctor(64 << 20, 1, false, () => undefined, true, "/x")).toThrow(TypeError);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.skipIf(!hasKvm())("creates a virtio-net NIC on a tap from boot.nics, removed with the VM", () => {
    const dir = mkdtempSync(join(tmpdir(), "kvt-nics-"));
    const tap = `kvtnic${process.pid % 100000}`;
    try {
      const code = Buffer.alloc(16, 0xf4);
      writeFileSync(join(dir, "vmlinux"), miniVmlinux(0x1000000, [[0x1000000, code, 16]]));
      writeFileSync(join(dir, "rw.img"), Buffer.alloc(1 << 20));
      const options = {
        memoryBytes: 64 << 20,
        boot: {
          kind: "linux" as const,
          kernelPath: join(dir, "vmlinux"),
          disks: [{ path: join(dir, "rw.img") }],
          nics: [{ tap, mac: "52:54:00:12:34:56" }],
        },
      };
      let vm: Vm;
      try {
        vm = Vm.create(options);
      } catch (err) {
        // Without CAP_NET_ADMIN (or /dev/net/tun) the refusal is a VmmError naming the step, never a crash.
        expect(err).toBeInstanceOf(VmmError);
        expect((err as VmmError).syscall).toMatch(/^(open|TUNSETIFF)$/);
        return;
      }
      try {
        expect(existsSync(`/sys/class/net/${tap}`)).toBe(true); // the kernel made the tap for this VM
        expect(vm.stats()).toMatchObject({ netRxFrames: 0, netTxFrames: 0, netErrors: 0, netBroken: 0 });
      } finally {
        vm.stop();
      }
      expect(existsSync(`/sys/class/net/${tap}`)).toBe(false);
      // Past the TypeScript validation, C++ still refuses a malformed nics argument (a TypeError, no machine) and
      // a multicast MAC (EINVAL).
      const Ctor = nativeAddon().NativeVm as new (...args: unknown[]) => NativeVm;
      expect(() => new Ctor(64 << 20, 1, false, () => undefined, true, [], [[tap, "52:54:00:12:34:56"]])).toThrow(
        /nics must be \[\[tap: string, mac: Uint8Array\(6\), vhost\?: 0 \| 1 \| 2\], \.\.\.\]/,
      );
      // vhost out of range (the modes are 0 off, 1 auto, 2 on).
      expect(
        () => new Ctor(64 << 20, 1, false, () => undefined, true, [], [[tap, new Uint8Array(6).fill(2), 3]]),
      ).toThrow(TypeError);
      expect(() => new Ctor(64 << 20, 1, false, () => undefined, true, [], [[tap, new Uint8Array(5)]])).toThrow(
        TypeError,
      );
      expect(
        () => new Ctor(64 << 20, 1, false, () => undefined, true, [], [[tap, Uint8Array.of(1, 0, 0, 0, 0, 1)]]),
      ).toThrow(VmmError);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
