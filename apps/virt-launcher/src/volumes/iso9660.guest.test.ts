/**
 * The images through a real Linux kernel's isofs (what the guest uses): one QEMU boot of a Debian kernel loop-mounts
 * every image below and reports names, modes, sizes and SHA-256s. Skipped, saying why, only when no kernel or QEMU
 * can be had (see guest-isofs.ts).
 */
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { buildConfigDriveDisk, buildNoCloudDisk } from "./cloud-init-disks.ts";
import { buildConfigMapDisk } from "./config-disks.ts";
import { type GuestEntry, guestParts, mountInGuest } from "./guest-isofs.ts";
import { type IsoFileInput, writeIso9660 } from "./iso9660.ts";

const timestamp = new Date("2026-01-02T03:04:05Z");
const sha = (b: Buffer | Uint8Array | string): string => createHash("sha256").update(b).digest("hex");

const sample: IsoFileInput[] = [
  { path: "user-data", data: "#cloud-config\n" },
  { path: "openstack/latest/meta_data.json", data: "{}", mode: 0o600 },
  { path: "empty", data: "" },
  { path: "Mixed.Case.name.TXT", data: "case" },
  { path: "spaces and ünïcödé ☃.conf", data: "odd" },
  { path: "semi;colon.txt", data: "semicolon" },
  { path: ".hidden", data: "dot" },
  { path: "n".repeat(253), data: "long" },
  { path: "big.bin", data: Buffer.alloc(3 * 1024 * 1024 + 17, 7) },
];
const manyKeys: IsoFileInput[] = Array.from({ length: 1500 }, (_, i) => ({
  path: `${String(i).padStart(4, "0")}-${"k".repeat(240)}`,
  data: `value ${i}\n`,
}));
const identity = { name: "testvmi", namespace: "default", firmwareUuid: "5d307ca9-b3ef-428c-8861-06e72d69f223" };

const images: Record<string, Buffer> = {
  sample: writeIso9660({ volumeId: "cidata", files: sample, timestamp }),
  manyKeys: writeIso9660({ volumeId: "cfgdata", files: manyKeys, timestamp }),
  none: writeIso9660({ volumeId: "cfgdata", files: [], timestamp }),
  jolietOnly: writeIso9660({ volumeId: "cfgdata", files: sample.slice(0, 6), timestamp, rockRidge: false }),
  noCloud: buildNoCloudDisk({ userData: "#cloud-config\n", networkData: "version: 2\n" }, identity, { timestamp }),
  configDrive: buildConfigDriveDisk({ userData: "#cloud-config\n" }, identity, { timestamp }),
  configMap: buildConfigMapDisk({ "app.properties": "a=1\n", "binary.bin": Uint8Array.from([0, 255]) }, { timestamp }),
};

function expectTree(got: Map<string, GuestEntry> | undefined, files: IsoFileInput[], defaultMode = 0o644): void {
  expect(got, "the guest mounted the image").toBeDefined();
  const dirs = new Set(
    files.flatMap((f) =>
      f.path
        .split("/")
        .slice(0, -1)
        .map((_, i, a) => a.slice(0, i + 1).join("/")),
    ),
  );
  expect([...got!.keys()].sort()).toEqual([...files.map((f) => f.path), ...dirs].sort());
  for (const f of files) {
    const e = got!.get(f.path)!;
    expect(e.sha256, f.path).toBe(sha(f.data));
    expect(e.mode, f.path).toBe(f.mode ?? defaultMode);
  }
}

describe("images under a Linux guest's isofs", () => {
  it("mount with exact names, modes and bytes (Rock Ridge), Joliet names without RR, and KubeVirt's layouts", async (ctx) => {
    const parts = await guestParts();
    if (typeof parts === "string") return ctx.skip(`no Linux guest to mount ISO images in: ${parts}`);
    const scratch = mkdtempSync(join(tmpdir(), "kvt-guest-iso-"));
    try {
      const seen = mountInGuest(parts, images, scratch);
      expectTree(seen.get("sample"), sample);
      expectTree(seen.get("manyKeys"), manyKeys);
      expect(seen.get("none")?.size).toBe(0);
      // Without Rock Ridge Linux shows the Joliet names (";1" dropped) and mode 0444/0555 files.
      const joliet = seen.get("jolietOnly");
      expect([...(joliet?.keys() ?? [])].sort()).toEqual(
        [
          "user-data",
          "openstack",
          "openstack/latest",
          "openstack/latest/meta_data.json",
          "empty",
          "Mixed.Case.name.TXT",
          "spaces and ünïcödé ☃.conf",
          "semi_colon.txt",
        ].sort(),
      );
      expect(joliet?.get("user-data")?.sha256).toBe(sha("#cloud-config\n"));
      expect([...(seen.get("noCloud")?.keys() ?? [])].sort()).toEqual(["meta-data", "network-config", "user-data"]);
      expect(seen.get("noCloud")?.get("user-data")?.mode).toBe(0o600);
      expect([...(seen.get("configDrive")?.keys() ?? [])].sort()).toEqual([
        "openstack",
        "openstack/latest",
        "openstack/latest/meta_data.json",
        "openstack/latest/user_data",
      ]);
      expect(seen.get("configMap")?.get("binary.bin")?.sha256).toBe(sha(Uint8Array.from([0, 255])));
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  }, 300_000);
});
