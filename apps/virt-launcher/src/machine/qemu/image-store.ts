/**
 * Reads the local image store the launcher resolves `containerDisk` images from in local mode (the layout written
 * by tools/images): `<store>/<repository>/<tag>/image.json` naming the kernel and initramfs beside it.
 * Kept here, small and read-only, because apps may not import tools; it could move to a lib if a second app needs it.
 */
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { BootSource } from "../machine.ts";

/** The store root: `$KVT_IMAGE_STORE`, else `<project>/.data/images`. */
export function imageStoreRoot(): string {
  const fromEnv = process.env.KVT_IMAGE_STORE;
  return fromEnv ? resolve(fromEnv) : new URL("../../../../../.data/images", import.meta.url).pathname;
}

/** The image is not in the store (or its manifest is unusable). */
export class ImageNotFoundError extends Error {
  constructor(ref: string, detail: string) {
    super(`image "${ref}" is not available in the local image store: ${detail}`);
    this.name = "ImageNotFoundError";
  }
}

interface Manifest {
  schemaVersion?: number;
  kernel?: unknown;
  initrd?: unknown;
  cmdline?: unknown;
  pvmSafe?: unknown;
}

const REF =
  /^([a-z0-9]+(?:[._-][a-z0-9]+)*(?:\/[a-z0-9]+(?:[._-][a-z0-9]+)*)*)(?::([A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?$/;
const FILE = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** Resolves `local/demo-linux:latest` to its kernel, initramfs, command line and PVM safety. */
export function resolveImage(ref: string, storeRoot: string = imageStoreRoot()): BootSource {
  const m = REF.exec(ref);
  if (!m?.[1]) throw new ImageNotFoundError(ref, "invalid reference (expected e.g. local/demo-linux:latest)");
  const dir = join(storeRoot, ...m[1].split("/"), m[2] ?? "latest");
  const file = join(dir, "image.json");
  if (!existsSync(file)) throw new ImageNotFoundError(ref, `no ${file} (build it: npm run build -w @kvt/images)`);
  let manifest: Manifest;
  try {
    manifest = JSON.parse(readFileSync(file, "utf8")) as Manifest;
  } catch (err) {
    throw new ImageNotFoundError(ref, `unreadable manifest: ${(err as Error).message}`);
  }
  if (manifest.schemaVersion !== 1 || typeof manifest.kernel !== "string" || !FILE.test(manifest.kernel)) {
    throw new ImageNotFoundError(ref, "manifest has no valid kernel");
  }
  if (manifest.initrd !== undefined && (typeof manifest.initrd !== "string" || !FILE.test(manifest.initrd))) {
    throw new ImageNotFoundError(ref, "manifest has an invalid initrd");
  }
  return {
    kernelPath: join(dir, manifest.kernel),
    initrdPath: typeof manifest.initrd === "string" ? join(dir, manifest.initrd) : undefined,
    cmdline: typeof manifest.cmdline === "string" ? manifest.cmdline : "",
    pvmSafe: manifest.pvmSafe === true,
  };
}
