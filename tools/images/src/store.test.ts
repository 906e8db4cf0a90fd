import { mkdtempSync, rmSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { imageDir, isCurrent, writeImage } from "./store.ts";

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
