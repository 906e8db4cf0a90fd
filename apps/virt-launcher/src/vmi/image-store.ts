/**
 * Resolves containerDisk and kernelBoot images through the local image store that tools/images writes (the
 * launcher may not import tools, so it reads the same on-disk contract):
 *
 *   <store>/<repository>/<tag>/image.json   {schemaVersion: 1, kernel, uncompressedKernel?, initrd?, cmdline,
 *                                             pvmSafe, bootMarker?, minMemoryBytes?, disk?}
 *   <store>/<repository>/<tag>/<disk>        the raw disk image (root filesystem), when the image has one
 *   <store>/<repository>/<tag>/<kernel>      e.g. local/demo-linux/latest/vmlinuz
 *
 * A reference without a tag means `latest`. The store root is the launcher's `--image-store` flag, else
 * `KVT_IMAGE_STORE`.
 *
 * A containerDisk's OCI image (tools/oci-images) carries the same manifest at its root, `/image.json`, with paths
 * relative to the image root (`boot/vmlinuz`, `disk/<file>`): {@link readImageDir} reads either form from the
 * directory the image's files are in (a store entry, or the image volume the kubelet mounted: image-volumes.ts).
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

/** What the launcher needs from a stored image. */
export interface StoredImage {
  readonly ref: string;
  readonly dir: string;
  /** Absolute path of the kernel. */
  readonly kernelPath: string;
  /** Absolute path of the same kernel uncompressed (ELF vmlinux), if the image has it. */
  readonly uncompressedKernelPath?: string;
  /** Absolute path of the initramfs, if the image has one. */
  readonly initrdPath?: string;
  readonly cmdline: string;
  readonly pvmSafe: boolean;
  /** The least guest memory the image boots with, when the image says. */
  readonly minMemoryBytes?: number;
  /** Absolute path of the image's raw disk (KubeVirt's /disk/ of a containerDisk), if it has one. */
  readonly diskPath?: string;
}

/** Looks an image reference up; throws {@link ImageNotFoundError} when it is not stored. */
export type ImageResolver = (ref: string) => StoredImage;

/** An image is missing from the store or unusable; `message` says which and why. */
export class ImageNotFoundError extends Error {
  override readonly name = "ImageNotFoundError";
}

const REF =
  /^([a-z0-9]+(?:[._-][a-z0-9]+)*(?:\/[a-z0-9]+(?:[._-][a-z0-9]+)*)*)(?::([A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?$/;

/** A file name or a relative path inside the image: no leading `/`, no `.` or `..` segment. */
function plainFile(value: unknown): value is string {
  if (typeof value !== "string" || value.length === 0 || value.startsWith("/")) return false;
  return value.split("/").every((part) => part !== "" && part !== "." && part !== "..");
}

/** A resolver over the store at `root`. */
export function imageStoreResolver(root: string): ImageResolver {
  return (ref) => {
    const m = REF.exec(ref);
    if (!m?.[1])
      throw new ImageNotFoundError(`invalid image reference "${ref}" (expected e.g. local/demo-linux:latest)`);
    const dir = join(root, ...m[1].split("/"), m[2] ?? "latest");
    if (!existsSync(join(dir, "image.json")))
      throw new ImageNotFoundError(`image "${ref}" is not in the local image store ${root}`);
    return readImageDir(dir, ref);
  };
}

/**
 * The image `ref` whose files are in `dir` (its `image.json` and the files it names). Throws
 * {@link ImageNotFoundError} when the manifest is missing, unreadable or not version 1 with a kernel, or names a
 * disk that is not there.
 */
export function readImageDir(dir: string, ref: string): StoredImage {
  const manifestPath = join(dir, "image.json");
  let manifest: Record<string, unknown>;
  try {
    manifest = JSON.parse(readFileSync(manifestPath, "utf8")) as Record<string, unknown>;
  } catch (error) {
    const missing = (error as NodeJS.ErrnoException).code === "ENOENT";
    throw new ImageNotFoundError(
      missing
        ? `image "${ref}" has no image.json in ${dir} (a kubevirt-ts containerDisk carries one at its root)`
        : `image "${ref}": unreadable image.json`,
      { cause: error },
    );
  }
  if (manifest.schemaVersion !== 1 || !plainFile(manifest.kernel)) {
    throw new ImageNotFoundError(`image "${ref}": image.json is not a version 1 manifest with a kernel`);
  }
  const initrd = plainFile(manifest.initrd) ? join(dir, manifest.initrd) : undefined;
  // The uncompressed kernel is only offered when its file is there: without it the bzImage boots everywhere.
  const vmlinux =
    plainFile(manifest.uncompressedKernel) && existsSync(join(dir, manifest.uncompressedKernel))
      ? join(dir, manifest.uncompressedKernel)
      : undefined;
  const disk = plainFile(manifest.disk) ? join(dir, manifest.disk) : undefined;
  if (disk && !existsSync(disk))
    throw new ImageNotFoundError(`image "${ref}": its disk ${String(manifest.disk)} is missing`);
  return {
    ref,
    dir,
    ...(disk ? { diskPath: disk } : {}),
    kernelPath: join(dir, manifest.kernel),
    ...(vmlinux ? { uncompressedKernelPath: vmlinux } : {}),
    ...(initrd ? { initrdPath: initrd } : {}),
    cmdline: typeof manifest.cmdline === "string" ? manifest.cmdline : "",
    pvmSafe: manifest.pvmSafe === true,
    ...(typeof manifest.minMemoryBytes === "number" && manifest.minMemoryBytes > 0
      ? { minMemoryBytes: manifest.minMemoryBytes }
      : {}),
  };
}

/** Resolves a file inside an image (kernelBoot's kernelPath/initrdPath), refusing paths that leave the image. */
export function fileInImage(image: StoredImage, path: string): string {
  const parts = path.split("/").filter((p) => p.length > 0 && p !== ".");
  if (parts.length === 0 || parts.includes("..")) {
    throw new ImageNotFoundError(`path "${path}" does not name a file inside image "${image.ref}"`);
  }
  return join(image.dir, ...parts);
}
