/**
 * Registers `local/test-guest:latest`: the deterministic test guest (a small PVH ELF built from C in native/ by the
 * VMM's build) copied into the image store, so a VMI's containerDisk can name it like any other image.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { defaultStoreRoot, type ImageManifest, imageDir, isCurrent, readManifest, writeImage } from "./store.ts";

/** The reference the test guest is stored under. */
export const TEST_GUEST_IMAGE = "local/test-guest:latest";

/** Stores the ELF at `elfPath` as `local/test-guest:latest` (skipped when the same bytes are stored already). */
export function registerTestGuest(
  elfPath: string,
  storeRoot: string = defaultStoreRoot(),
): { dir: string; manifest: ImageManifest; skipped: boolean } {
  if (!existsSync(elfPath)) throw new Error(`test guest ELF not found at ${elfPath} (build native/ first)`);
  const elf = readFileSync(elfPath);
  if (elf.length < 4 || elf[0] !== 0x7f || elf.toString("latin1", 1, 4) !== "ELF")
    throw new Error(`${elfPath} is not an ELF file`);
  const digest = `sha256:${createHash("sha256").update(elf).digest("hex")}`;
  const stored = readManifest(storeRoot, TEST_GUEST_IMAGE);
  if (stored && isCurrent(storeRoot, TEST_GUEST_IMAGE, digest))
    return { dir: imageDir(storeRoot, TEST_GUEST_IMAGE), manifest: stored, skipped: true };
  const manifest: ImageManifest = {
    schemaVersion: 1,
    image: TEST_GUEST_IMAGE,
    kernel: "test-guest.elf",
    cmdline: "",
    pvmSafe: true,
    inputsDigest: digest,
    sources: [{ name: elfPath, version: digest }],
    builtAt: new Date().toISOString(),
  };
  return { dir: writeImage(storeRoot, manifest, new Map([["test-guest.elf", elf]])), manifest, skipped: false };
}
