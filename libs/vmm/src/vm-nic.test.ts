import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseLinuxBoot } from "./linux-boot.ts";
import { MAX_VM_PCI_DEVICES, nativeNics, parseMac, parseVmNics } from "./vm-nic.ts";
import { parseVmOptions } from "./vm-options.ts";

const dir = mkdtempSync(join(tmpdir(), "kvt-vm-nic-"));
const image = join(dir, "disk.img");
writeFileSync(image, Buffer.alloc(4096));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("boot.nics validation (no KVM needed)", () => {
  it("normalises the MAC and hands C++ [tap, 6 bytes] pairs", () => {
    const nics = parseVmNics([
      { tap: "kvt-tap0", mac: "52:54:00:AB:cd:01" },
      { tap: "tap1", mac: "02:00:00:00:00:02", vhost: "off" },
      { tap: "tap2", mac: "02:00:00:00:00:03", vhost: "on" },
    ]);
    expect(nics).toEqual([
      { tap: "kvt-tap0", mac: "52:54:00:ab:cd:01", vhost: "auto" },
      { tap: "tap1", mac: "02:00:00:00:00:02", vhost: "off" },
      { tap: "tap2", mac: "02:00:00:00:00:03", vhost: "on" },
    ]);
    // vhost as native/src/devices/virtio/vhost_net.h's VhostMode: 0 off, 1 auto, 2 on.
    expect(nativeNics(nics)).toEqual([
      ["kvt-tap0", Uint8Array.of(0x52, 0x54, 0x00, 0xab, 0xcd, 0x01), 1],
      ["tap1", Uint8Array.of(2, 0, 0, 0, 0, 2), 0],
      ["tap2", Uint8Array.of(2, 0, 0, 0, 0, 3), 2],
    ]);
    expect(parseVmNics([])).toEqual([]);
  });

  it("refuses a vhost mode it does not know", () => {
    expect(() => parseVmNics([{ tap: "t0", mac: "52:54:00:00:00:01", vhost: "yes" }])).toThrow(
      /boot.nics\[0\].vhost must be one of off, auto, on, got "yes"/,
    );
  });

  it.each([
    ["52:54:00:12:34", /six hex octets/],
    ["52-54-00-12-34-56", /six hex octets/],
    ["52:54:00:12:34:5g", /six hex octets/],
    ["52:54:00:12:34:56:78", /six hex octets/],
    ["01:00:5e:00:00:01", /unicast address, got multicast/],
    ["ff:ff:ff:ff:ff:ff", /multicast/],
    ["00:00:00:00:00:00", /all zero/],
  ])("refuses the MAC %s with a RangeError", (mac, why) => {
    expect(() => parseVmNics([{ tap: "t0", mac }])).toThrow(RangeError);
    expect(() => parseVmNics([{ tap: "t0", mac }])).toThrow(why);
    expect(() => parseMac(mac)).toThrow(RangeError);
  });

  it("names the NIC in each refusal", () => {
    expect(() =>
      parseVmNics([
        { tap: "t0", mac: "52:54:00:00:00:01" },
        { tap: "t1", mac: "x" },
      ]),
    ).toThrow(new RangeError('boot.nics[1].mac must be six hex octets like 52:54:00:12:34:56, got "x"'));
  });

  it("refuses bad tap names: too long, not an interface name, used twice", () => {
    expect(parseVmNics([{ tap: "x".repeat(15), mac: "52:54:00:00:00:01" }])).toHaveLength(1);
    expect(() => parseVmNics([{ tap: "x".repeat(16), mac: "52:54:00:00:00:01" }])).toThrow(
      /boot.nics\[0\].tap must be at most 15 bytes/,
    );
    for (const tap of ["a/b", "a b", "a:b", ".", ".."]) {
      expect(() => parseVmNics([{ tap, mac: "52:54:00:00:00:01" }])).toThrow(/not a valid interface name/);
    }
    expect(() =>
      parseVmNics([
        { tap: "t0", mac: "52:54:00:00:00:01" },
        { tap: "t0", mac: "52:54:00:00:00:02" },
      ]),
    ).toThrow(new RangeError('boot.nics[1].tap "t0" is used by another NIC'));
  });

  it("refuses wrong types with TypeError", () => {
    expect(() => parseVmNics("tap0")).toThrow(new TypeError("boot.nics must be an array"));
    expect(() => parseVmNics([null])).toThrow(new TypeError("boot.nics[0] must be an object"));
    expect(() => parseVmNics([{ mac: "52:54:00:00:00:01" }])).toThrow(
      new TypeError("boot.nics[0].tap must be a non-empty string"),
    );
    expect(() => parseVmNics([{ tap: "t0", mac: 0x525400000001 }])).toThrow(
      new TypeError("boot.nics[0].mac must be a string"),
    );
  });

  it("shares the 16 PCI slots with the disks", () => {
    const nics = Array.from({ length: 3 }, (_, j) => ({ tap: `t${j}`, mac: `52:54:00:00:00:0${j + 1}` }));
    expect(parseVmNics(nics, MAX_VM_PCI_DEVICES - 3)).toHaveLength(3);
    expect(() => parseVmNics(nics, MAX_VM_PCI_DEVICES - 2)).toThrow(
      new RangeError("boot.nics and boot.disks must be at most 16 devices together, got 17"),
    );
  });

  it("is checked by Vm.create's option parser before KVM is touched", () => {
    const nic = { tap: "kvt0", mac: "52:54:00:12:34:56" };
    const boot = { kind: "linux" as const, kernelPath: "/k", disks: [{ path: image }], nics: [nic] };
    expect(parseLinuxBoot(boot).nics).toEqual([{ ...nic, vhost: "auto" }]);
    expect(parseLinuxBoot({ kind: "linux", kernelPath: "/k" }).nics).toBeUndefined();
    expect(() =>
      parseVmOptions({ memoryBytes: 64 << 20, boot: { ...boot, nics: [{ tap: "kvt0", mac: "01:00:00:00:00:01" }] } }),
    ).toThrow(RangeError);
    const sixteen = Array.from({ length: 16 }, () => ({ path: image }));
    expect(() => parseLinuxBoot({ ...boot, disks: sixteen })).toThrow(/at most 16 devices together, got 17/);
  });
});
