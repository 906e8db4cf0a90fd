import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseLinuxBoot } from "./linux-boot.ts";
import { blockDeviceBytes, MAX_DISK_SERIAL_BYTES, MAX_VM_DISKS, nativeDisks, parseVmDisks } from "./vm-disk.ts";
import { parseVmOptions } from "./vm-options.ts";

const dir = mkdtempSync(join(tmpdir(), "kvt-vm-disk-"));
const image = join(dir, "disk.img");
writeFileSync(image, Buffer.alloc(4096));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("boot.disks validation (no KVM needed)", () => {
  it("fills the defaults and hands C++ [path, readOnly, serial, copy] tuples", () => {
    const disks = parseVmDisks([
      { path: image },
      { path: image, readOnly: true, serial: "kvt-disk-1" },
      { path: image, migrate: "copy" },
    ]);
    expect(disks).toEqual([
      { path: image, readOnly: false, serial: "", migrate: "shared", base: "" },
      { path: image, readOnly: true, serial: "kvt-disk-1", migrate: "shared", base: "" },
      { path: image, readOnly: false, serial: "", migrate: "copy", base: "" },
    ]);
    expect(nativeDisks(disks)).toEqual([
      [image, false, "", false, ""],
      [image, true, "kvt-disk-1", false, ""],
      [image, false, "", true, ""],
    ]);
    expect(parseVmDisks([])).toEqual([]);
  });

  it("takes a copy-on-write base of the overlay's size and refuses a wrong one", () => {
    const base = join(dir, "base.img");
    writeFileSync(base, Buffer.alloc(4096, 7));
    const disks = parseVmDisks([{ path: image, base, migrate: "copy" }]);
    expect(nativeDisks(disks)).toEqual([[image, false, "", true, base]]);
    const small = join(dir, "small.img");
    writeFileSync(small, Buffer.alloc(512));
    expect(() => parseVmDisks([{ path: image, base: small }])).toThrow(
      `Cannot use boot.disks[0].base "${small}": 512 bytes, the overlay has 4096`,
    );
    expect(() => parseVmDisks([{ path: image, base, readOnly: true }])).toThrow(RangeError);
    expect(() => parseVmDisks([{ path: image, base: join(dir, "none") }])).toThrow(/ENOENT/);
    expect(() => parseVmDisks([{ path: image, base: 3 }])).toThrow(
      new TypeError("boot.disks[0].base must be a string"),
    );
  });

  it.runIf(process.getuid?.() === 0)("takes a block device base of the overlay's size (a loop device, root)", () => {
    const backing = join(dir, "device-backing.img");
    writeFileSync(backing, Buffer.alloc(8192, 1));
    const device = execFileSync("losetup", ["--find", "--show", backing], { encoding: "utf8" }).trim();
    try {
      expect(blockDeviceBytes(device)).toBe(8192);
      const overlay = join(dir, "over-device.img");
      writeFileSync(overlay, Buffer.alloc(8192));
      expect(nativeDisks(parseVmDisks([{ path: overlay, base: device, migrate: "copy" }]))).toEqual([
        [overlay, false, "", true, device],
      ]);
      expect(() => parseVmDisks([{ path: image, base: device }])).toThrow(
        `Cannot use boot.disks[0].base "${device}": 8192 bytes, the overlay has 4096`,
      );
      expect(() => blockDeviceBytes(backing)).toThrow(`${backing} is not a block device`);
    } finally {
      execFileSync("losetup", ["--detach", device]);
    }
  });

  it("refuses a migrate mode other than shared or copy", () => {
    expect(() => parseVmDisks([{ path: image, migrate: "block" }])).toThrow(
      new RangeError('boot.disks[0].migrate must be "shared" or "copy", got "block"'),
    );
    expect(() => parseVmDisks([{ path: image, migrate: true }])).toThrow(
      new TypeError("boot.disks[0].migrate must be a string"),
    );
  });

  it("accepts a block device and a symlink to a file", () => {
    const link = join(dir, "link.img");
    symlinkSync(image, link);
    expect(parseVmDisks([{ path: link }])[0]?.path).toBe(link);
    // /dev/loop0 or /dev/ram0 may be absent in a container; test a block device only where there is one.
    for (const dev of ["/dev/loop0", "/dev/ram0", "/dev/vda", "/dev/sda"]) {
      try {
        expect(parseVmDisks([{ path: dev }])[0]?.path).toBe(dev);
        break;
      } catch {
        // not present (or not a block device) here: try the next one
      }
    }
  });

  it("refuses a missing path, a directory and a character device", () => {
    expect(() => parseVmDisks([{ path: join(dir, "nope.img") }])).toThrow(
      `Cannot use boot.disks[0].path "${join(dir, "nope.img")}": ENOENT`,
    );
    const sub = join(dir, "sub");
    mkdirSync(sub);
    expect(() => parseVmDisks([{ path: image }, { path: sub }])).toThrow(
      `Cannot use boot.disks[1].path "${sub}": not a regular file or block device`,
    );
    expect(() => parseVmDisks([{ path: "/dev/null" }])).toThrow(/not a regular file or block device/);
  });

  it("refuses wrong types with TypeError", () => {
    expect(() => parseVmDisks("disk.img")).toThrow(new TypeError("boot.disks must be an array"));
    expect(() => parseVmDisks([null])).toThrow(new TypeError("boot.disks[0] must be an object"));
    expect(() => parseVmDisks([{ path: "" }])).toThrow(new TypeError("boot.disks[0].path must be a non-empty string"));
    expect(() => parseVmDisks([{ path: 7 }])).toThrow(TypeError);
    expect(() => parseVmDisks([{ path: image, readOnly: "yes" }])).toThrow(
      new TypeError("boot.disks[0].readOnly must be a boolean"),
    );
    expect(() => parseVmDisks([{ path: image, serial: 42 }])).toThrow(
      new TypeError("boot.disks[0].serial must be a string"),
    );
  });

  it("limits the serial to 20 bytes of printable ASCII and the count to 16 disks", () => {
    expect(MAX_DISK_SERIAL_BYTES).toBe(20);
    expect(parseVmDisks([{ path: image, serial: "x".repeat(20) }])[0]?.serial).toHaveLength(20);
    expect(() => parseVmDisks([{ path: image, serial: "x".repeat(21) }])).toThrow(
      new RangeError("boot.disks[0].serial must be at most 20 bytes, got 21"),
    );
    expect(() => parseVmDisks([{ path: image, serial: "dïsk" }])).toThrow(
      new RangeError("boot.disks[0].serial must be printable ASCII"),
    );
    expect(() => parseVmDisks([{ path: image, serial: "a\nb" }])).toThrow(RangeError);
    const many = Array.from({ length: MAX_VM_DISKS + 1 }, () => ({ path: image }));
    expect(() => parseVmDisks(many)).toThrow(new RangeError("boot.disks must have at most 16 disks, got 17"));
    expect(parseVmDisks(many.slice(1))).toHaveLength(16);
  });

  it("is checked by Vm.create's option parser before KVM is touched", () => {
    const boot = { kind: "linux" as const, kernelPath: "/k", disks: [{ path: image, serial: "kvt-disk-0" }] };
    expect(parseLinuxBoot(boot).disks).toEqual([
      { path: image, readOnly: false, serial: "kvt-disk-0", migrate: "shared", base: "" },
    ]);
    expect(parseLinuxBoot({ kind: "linux", kernelPath: "/k" }).disks).toBeUndefined();
    expect(() =>
      parseVmOptions({ memoryBytes: 64 << 20, boot: { ...boot, disks: [{ path: join(dir, "gone.img") }] } }),
    ).toThrow(/ENOENT/);
  });
});
