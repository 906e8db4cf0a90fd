import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { VmmError } from "./errors.ts";
import { hasKvm } from "./kvm.ts";
import { joinInitrd, linuxCmdline, parseLinuxBoot } from "./linux-boot.ts";
import { noCloudSeedInitrd } from "./linux-seed.ts";
import { Vm } from "./vm.ts";
import { parseVmOptions } from "./vm-options.ts";

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
});
