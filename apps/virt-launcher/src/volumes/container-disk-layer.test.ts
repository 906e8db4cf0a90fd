import { createHash } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { MachineDisk } from "../machine/machine.ts";
import { makeWriteLayer, makeWriteLayers } from "./container-disk-layer.ts";
import { ensureQemuUtils, qemuImg, qemuIo } from "./host-qemu-img.ts";

// The images are made while the tests are collected (below), so qemu-img is installed first, when missing.
await ensureQemuUtils();
const root = mkdtempSync(join(tmpdir(), "kvt-layer-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const MiB = 1 << 20;
const md5 = (path: string): string => createHash("md5").update(readFileSync(path)).digest("hex");

function disk(image: string, path: string, extra: Partial<MachineDisk> = {}): MachineDisk {
  return {
    name: "root",
    kind: "containerDisk",
    shared: false,
    readOnly: false,
    fresh: true,
    path,
    copyFrom: image,
    ...extra,
  };
}

/** A raw image with data at 0 and at 1 MiB, and a qcow2 image over it (a write at 64 KiB), in `dir`. */
function images(dir: string): { raw: string; qcow2: string } {
  mkdirSync(dir, { recursive: true });
  const raw = join(dir, "disk.raw");
  const data = Buffer.alloc(2 * MiB, 0);
  data.write("base-data", 0);
  data.fill(0x42, MiB, MiB + 4096);
  writeFileSync(raw, data);
  const qcow2 = join(dir, "disk.qcow2");
  qemuImg("create", "-q", "-f", "qcow2", "-b", "disk.raw", "-F", "raw", qcow2);
  qemuIo(qcow2, "write -P 0x61 65536 4096");
  return { raw, qcow2 };
}

describe("containerDisk write layers", () => {
  const dir = join(root, "image");
  const { raw, qcow2 } = images(dir);

  it("native, raw image: an empty sparse overlay of the image's size over the image as its base", async () => {
    const path = join(root, "native", "root.img");
    const before = md5(raw);
    const [layered] = await makeWriteLayers([disk(raw, path)], "native");
    expect(layered).toMatchObject({ path, base: raw });
    expect(layered?.copyFrom).toBeUndefined();
    expect(statSync(path).size).toBe(2 * MiB);
    expect(statSync(path).blocks).toBe(0); // nothing allocated until the guest writes
    expect(md5(raw)).toBe(before);
    // A second start replaces the layer: nothing of the last run's writes survives.
    writeFileSync(path, Buffer.alloc(2 * MiB, 1));
    await makeWriteLayer(disk(raw, path), "native");
    expect(statSync(path).blocks).toBe(0);
  });

  it("native, qcow2 image: a private raw import (our VMM reads raw bases); a migration target's starts empty", async () => {
    const path = join(root, "native-q", "root.img");
    const layered = await makeWriteLayer(disk(qcow2, path), "native");
    expect(layered.base).toBeUndefined();
    const copy = readFileSync(path);
    expect(copy.subarray(0, 9).toString()).toBe("base-data");
    expect(copy.subarray(65536, 65536 + 4096)).toEqual(Buffer.alloc(4096, 0x61));
    expect(copy.subarray(MiB, MiB + 4096)).toEqual(Buffer.alloc(4096, 0x42));
    const target = join(root, "native-q", "target.img");
    await makeWriteLayer(disk(qcow2, target, { incoming: true }), "native");
    expect(statSync(target).size).toBe(2 * MiB);
    expect(statSync(target).blocks).toBe(0);
  });

  it.each([
    ["raw", "disk.raw"],
    ["qcow2", "disk.qcow2"],
  ])("qemu, %s image: a qcow2 overlay that QEMU writes while the image's digest stays the same", async (_f, name) => {
    const image = join(dir, name);
    const path = join(root, `qemu-${name}`, "root.img");
    const before = md5(image);
    const layered = await makeWriteLayer(disk(image, path), "qemu");
    expect(layered).toMatchObject({ path, format: "qcow2" });
    expect(qemuImg("check", "-f", "qcow2", path)).toContain("No errors were found");
    expect(qemuImg("info", "--output=json", path)).toContain(`"backing-filename": "${image}"`);
    // The guest's writes (here qemu-io through the same qcow2 driver) land in the overlay only.
    qemuIo(path, "write -P 0x77 0 512", "write -P 0x78 1048576 131072");
    expect(md5(image)).toBe(before);
    const merged = join(root, `qemu-${name}`, "merged.raw");
    qemuImg("convert", "-f", "qcow2", "-O", "raw", path, merged);
    const m = readFileSync(merged);
    expect(m.subarray(0, 512)).toEqual(Buffer.alloc(512, 0x77));
    expect(m.subarray(512, 1024)).toEqual(readFileSync(raw).subarray(512, 1024));
    expect(m.subarray(MiB, MiB + 131072)).toEqual(Buffer.alloc(131072, 0x78));
    expect(m.subarray(65536, 65536 + 4096)).toEqual(Buffer.alloc(4096, name === "disk.qcow2" ? 0x61 : 0));
    expect(qemuImg("check", "-f", "qcow2", path)).toContain("No errors were found");
  });

  it("a read-only disk uses the image itself, with no layer", async () => {
    const path = join(root, "ro", "root.img");
    expect(await makeWriteLayer(disk(raw, path, { readOnly: true }), "native")).toMatchObject({ path: raw });
    expect(await makeWriteLayer(disk(qcow2, path, { readOnly: true }), "qemu")).toMatchObject({
      path: qcow2,
      format: "qcow2",
    });
    expect(existsSync(path)).toBe(false);
  });

  it("refuses a truncated image and a backing file outside the image's directory, on both backends", async () => {
    const bad = join(root, "bad");
    mkdirSync(bad, { recursive: true });
    const truncated = join(bad, "truncated.qcow2");
    writeFileSync(truncated, readFileSync(qcow2).subarray(0, 200));
    const outside = join(bad, "outside.qcow2");
    qemuImg("create", "-q", "-f", "qcow2", "-b", raw, "-F", "raw", outside);
    const link = join(bad, "link.raw");
    symlinkSync("/etc/hostname", link);
    for (const backend of ["native", "qemu"] as const) {
      await expect(makeWriteLayer(disk(truncated, join(bad, `t-${backend}`)), backend)).rejects.toMatchObject({
        name: "DiskImageError",
        message: expect.stringContaining("truncated.qcow2"),
      });
      await expect(makeWriteLayer(disk(outside, join(bad, `o-${backend}`)), backend)).rejects.toMatchObject({
        name: "DiskImageError",
      });
    }
    expect(existsSync(join(bad, "t-qemu"))).toBe(false);
  });
});
