import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { fileInImage, ImageNotFoundError, imageStoreResolver } from "./image-store.ts";

describe("imageStoreResolver()", () => {
  it("resolves a stored image to its kernel, initrd and command line, and rejects bad references and manifests", () => {
    const store = mkdtempSync(join(tmpdir(), "kvt-store-"));
    try {
      const dir = join(store, "local", "demo-linux", "latest");
      mkdirSync(dir, { recursive: true });
      writeFileSync(
        join(dir, "image.json"),
        JSON.stringify({ schemaVersion: 1, kernel: "vmlinuz", initrd: "initrd.img", cmdline: "quiet", pvmSafe: false }),
      );
      const resolve = imageStoreResolver(store);
      expect(resolve("local/demo-linux:latest")).toEqual({
        ref: "local/demo-linux:latest",
        dir,
        kernelPath: join(dir, "vmlinuz"),
        initrdPath: join(dir, "initrd.img"),
        cmdline: "quiet",
        pvmSafe: false,
      });
      expect(resolve("local/demo-linux").kernelPath).toBe(join(dir, "vmlinuz"));
      expect(() => resolve("local/other:latest")).toThrow(ImageNotFoundError);
      expect(() => resolve("../../etc:x")).toThrow(/invalid image reference/);
      expect(() => fileInImage(resolve("local/demo-linux"), "../../etc/passwd")).toThrow(/does not name a file/);
      writeFileSync(join(dir, "image.json"), JSON.stringify({ schemaVersion: 1, kernel: "../../../etc/passwd" }));
      expect(() => resolve("local/demo-linux:latest")).toThrow(/not a version 1 manifest with a kernel/);
      writeFileSync(join(dir, "image.json"), "{not json");
      expect(() => resolve("local/demo-linux:latest")).toThrow(/unreadable image.json/);
    } finally {
      rmSync(store, { recursive: true, force: true });
    }
  });
});
