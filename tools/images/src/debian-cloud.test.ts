import { closeSync, existsSync, openSync, readFileSync, readSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  DEBIAN_CLOUD_BOOT_MARKER,
  DEBIAN_CLOUD_CMDLINE,
  DEBIAN_CLOUD_IMAGE,
  DEBIAN_CLOUD_PACKAGES,
  dpkgExcludes,
  mmdebstrapArgs,
} from "./debian-cloud.ts";
import { defaultStoreRoot, imageDir, readManifest } from "./store.ts";

const guest = (name: string): string => readFileSync(new URL(`./guest/debian-cloud/${name}`, import.meta.url), "utf8");

describe("local/debian-cloud build inputs", () => {
  it("mmdebstrapArgs() builds bookworm from Debian's archive with the guest packages and the deb cache", () => {
    const args = mmdebstrapArgs("/w/rootfs", "/c/debs");
    expect(args).toContain("--mode=root");
    expect(args).toContain(`--include=${DEBIAN_CLOUD_PACKAGES.join(",")}`);
    for (const p of ["systemd-sysv", "cloud-init", "openssh-server", "fio", "linux-image-amd64", "initramfs-tools"])
      expect(DEBIAN_CLOUD_PACKAGES).toContain(p);
    expect(args).toContain("--setup-hook=sync-in /c/debs /var/cache/apt/archives");
    expect(args).toContain("--customize-hook=sync-out /var/cache/apt/archives /c/debs");
    expect(args.find((a) => a.includes("customize.sh"))).toMatch(/"\$1" KVT_DEBIAN_CLOUD_BOOTED$/);
    const tail = args.slice(args.indexOf("bookworm"));
    expect(tail[1]).toBe("/w/rootfs");
    expect(tail.slice(2).every((m) => m.startsWith("deb http://deb.debian.org/"))).toBe(true);
  });

  it("dpkgExcludes() drops docs and unused module trees but keeps copyrights and virtio", () => {
    const ex = dpkgExcludes();
    expect(ex).toContain("--dpkgopt=path-exclude=/usr/share/doc/*");
    expect(ex.at(-1)).toBe("--dpkgopt=path-include=/usr/share/doc/*/copyright");
    expect(ex).toContain("--dpkgopt=path-exclude=/lib/modules/*/kernel/drivers/gpu/*");
    expect(ex.some((e) => /virtio|drivers\/block|\/fs\//.test(e))).toBe(false);
  });

  it("the guest files configure NoCloud from cidata, the initramfs modules and the marker", () => {
    expect(guest("cloud.cfg")).toMatch(/^datasource_list: \[ NoCloud, None \]$/m);
    expect(guest("cloud.cfg")).toMatch(/fs_label: cidata/);
    expect(guest("initramfs-modules").split("\n")).toEqual(
      expect.arrayContaining(["virtio_pci", "virtio_blk", "ext4"]),
    );
    expect(guest("boot-marker.service")).toMatch(/^After=cloud-final\.service/m);
    expect(guest("boot-marker.sh")).toContain("@@BOOT_MARKER@@");
    expect(guest("fstab")).toMatch(/^LABEL=rootfs \/ ext4/m);
    expect(DEBIAN_CLOUD_CMDLINE).toMatch(/^root=\/dev\/vda rw console=ttyS0/);
  });

  // The build itself takes minutes and needs root: `npm run build -w @kvt/images -- --debian-cloud`. When it has
  // run, its manifest is checked here.
  const dir = imageDir(defaultStoreRoot(), DEBIAN_CLOUD_IMAGE);
  it.runIf(existsSync(join(dir, "image.json")))(
    "a stored image has its disk, kernel and initrd beside image.json",
    () => {
      const m = readManifest(defaultStoreRoot(), DEBIAN_CLOUD_IMAGE);
      expect(m).toMatchObject({
        disk: "disk.img",
        kernel: "vmlinuz",
        initrd: "initrd.img",
        bootMarker: DEBIAN_CLOUD_BOOT_MARKER,
      });
      for (const f of [m?.disk, m?.kernel, m?.initrd]) expect(existsSync(join(dir, f ?? "missing"))).toBe(true);
      // The ext4 superblock magic 0xEF53 at 1024 + 0x38, and the label the fstab mounts.
      const sb = Buffer.alloc(2048);
      const fd = openSync(join(dir, "disk.img"), "r");
      try {
        readSync(fd, sb, 0, sb.length, 0);
      } finally {
        closeSync(fd);
      }
      expect(sb.readUInt16LE(1024 + 0x38)).toBe(0xef53);
      expect(sb.toString("latin1", 1024 + 0x78, 1024 + 0x78 + 6)).toBe("rootfs");
    },
  );
});
