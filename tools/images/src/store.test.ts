import { mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { imageDir, isCurrent, restoreMachineImage, saveMachineImage, writeImage } from "./store.ts";

describe("isCurrent()", () => {
  it("wants every file the manifest names, the uncompressed kernel too", () => {
    const root = mkdtempSync(join(tmpdir(), "kvt-store-"));
    try {
      const manifest = {
        schemaVersion: 1 as const,
        image: "local/k:latest",
        kernel: "vmlinuz",
        uncompressedKernel: "vmlinux",
        cmdline: "",
        pvmSafe: false,
        inputsDigest: "sha256:x",
        sources: [],
        builtAt: "2026-11-22T00:00:00Z",
      };
      const files = new Map([
        ["vmlinuz", Buffer.from("bz")],
        ["vmlinux", Buffer.from("elf")],
      ]);
      writeImage(root, manifest, files);
      expect(isCurrent(root, "local/k:latest", "sha256:x")).toBe(true);
      expect(isCurrent(root, "local/k:latest", "sha256:y")).toBe(false);
      unlinkSync(join(imageDir(root, "local/k:latest"), "vmlinux"));
      expect(isCurrent(root, "local/k:latest", "sha256:x")).toBe(false);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe("the machine's cache of built images", () => {
  it("gives a fresh store the image another store built from the same inputs and builder code, and only that", () => {
    const tmp = mkdtempSync(join(tmpdir(), "kvt-store-mc-"));
    const before = process.env.KVT_MACHINE_CACHE;
    process.env.KVT_MACHINE_CACHE = join(tmp, "machine");
    try {
      const builder = join(tmp, "builder.ts");
      writeFileSync(builder, "v1");
      const image = { ref: "local/k:latest", inputsDigest: "sha256:x", builderSources: [builder] };
      const first = join(tmp, "first");
      writeImage(
        first,
        {
          schemaVersion: 1,
          image: "local/k:latest",
          kernel: "vmlinuz",
          disk: "disk.img",
          cmdline: "console=ttyS0",
          pvmSafe: false,
          inputsDigest: "sha256:x",
          sources: [],
          builtAt: "2026-11-27T00:00:00Z",
        },
        new Map([
          ["vmlinuz", new Uint8Array([1, 2, 3])],
          ["disk.img", new Uint8Array([4, 5])],
        ]),
      );
      expect(restoreMachineImage(join(tmp, "second"), image)).toBeUndefined(); // nothing saved yet
      saveMachineImage(first, image);

      const second = join(tmp, "second");
      expect(restoreMachineImage(second, image)?.cmdline).toBe("console=ttyS0");
      expect(isCurrent(second, "local/k:latest", "sha256:x")).toBe(true);
      expect([...readFileSync(join(imageDir(second, "local/k:latest"), "disk.img"))]).toEqual([4, 5]);

      // Other inputs, or other builder code: built afresh.
      expect(restoreMachineImage(join(tmp, "third"), { ...image, inputsDigest: "sha256:y" })).toBeUndefined();
      writeFileSync(builder, "v2");
      expect(restoreMachineImage(join(tmp, "fourth"), image)).toBeUndefined();
    } finally {
      if (before === undefined) delete process.env.KVT_MACHINE_CACHE;
      else process.env.KVT_MACHINE_CACHE = before;
      rmSync(tmp, { recursive: true, force: true });
    }
  });
});
