import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ConsoleScrollback } from "./console-buffer.ts";
import { ImageNotFoundError, resolveImage } from "./image-store.ts";

describe("resolveImage()", () => {
  it("resolves a stored image to its kernel, initrd and command line, and rejects bad references and manifests", () => {
    const store = mkdtempSync(join(tmpdir(), "kvt-store-"));
    try {
      const dir = join(store, "local", "demo-linux", "latest");
      mkdirSync(dir, { recursive: true });
      writeFileSync(
        join(dir, "image.json"),
        JSON.stringify({ schemaVersion: 1, kernel: "vmlinuz", initrd: "initrd.img", cmdline: "quiet", pvmSafe: false }),
      );
      expect(resolveImage("local/demo-linux:latest", store)).toEqual({
        kernelPath: join(dir, "vmlinuz"),
        initrdPath: join(dir, "initrd.img"),
        cmdline: "quiet",
        pvmSafe: false,
      });
      expect(resolveImage("local/demo-linux", store).kernelPath).toBe(join(dir, "vmlinuz"));
      expect(() => resolveImage("local/other:latest", store)).toThrow(ImageNotFoundError);
      expect(() => resolveImage("../../etc:x", store)).toThrow(/invalid reference/);
      writeFileSync(join(dir, "image.json"), JSON.stringify({ schemaVersion: 1, kernel: "../../../etc/passwd" }));
      expect(() => resolveImage("local/demo-linux:latest", store)).toThrow(/no valid kernel/);
    } finally {
      rmSync(store, { recursive: true, force: true });
    }
  });
});

describe("ConsoleScrollback", () => {
  it("keeps only the newest bytes", () => {
    const sb = new ConsoleScrollback(5);
    sb.push(new TextEncoder().encode("abc"));
    sb.push(new TextEncoder().encode("defg"));
    expect(new TextDecoder().decode(sb.snapshot())).toBe("cdefg");
  });
});
