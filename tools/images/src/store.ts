/**
 * The local image store: where `containerDisk` images of the local cluster live. One directory per image:
 *
 *   <store>/                          default <project>/.data/images (git-ignored), or $KVT_IMAGE_STORE
 *     <repository>/<tag>/             e.g. local/demo-linux/latest/
 *       image.json                    the manifest below (written last: its presence means the image is complete)
 *       vmlinuz | test-guest.elf      the kernel (file name given by image.json "kernel")
 *       initrd.img                    the initramfs, when the image has one ("initrd")
 *       disk.img                      the raw root-filesystem disk, when the image has one ("disk")
 *     .cache/                         downloaded .debs and unpacked packages, reused by rebuilds
 *
 * A reference `local/demo-linux:latest` maps to `<store>/local/demo-linux/latest`; no tag means `latest`.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { machineCache, machineCacheKey } from "./machine-cache.ts";

/** The manifest of one stored image (`image.json`). */
export interface ImageManifest {
  readonly schemaVersion: 1;
  /** The reference it is stored under, e.g. `local/demo-linux:latest`. */
  readonly image: string;
  /** Kernel file name inside the image directory. */
  readonly kernel: string;
  /**
   * The same kernel uncompressed (an ELF vmlinux), for VMMs that boot it directly and so skip its self-decompression;
   * `kernel` (the bzImage) stays for the others (QEMU).
   */
  readonly uncompressedKernel?: string;
  /** Initramfs file name inside the image directory, if any. */
  readonly initrd?: string;
  /**
   * The raw disk image (the root filesystem) inside the image directory, if any: KubeVirt's containerDisk `/disk/`
   * file. virt-launcher gives each VMI its own copy as the VMI's disk in spec order.
   */
  readonly disk?: string;
  /** Default kernel command line. */
  readonly cmdline: string;
  /** True when the guest runs on a PVM KVM (ring-0 kept tiny), like the test guest; false for a stock Linux kernel. */
  readonly pvmSafe: boolean;
  /** A line the guest prints on its console once booted, if it has one. */
  readonly bootMarker?: string;
  /**
   * The least guest memory the image boots with. A VMI asking for less (the seed's vm-cirros asks for 64M, enough for
   * cirros but not for a stock Debian kernel, whose decompressor alone runs out) gets this much; the launcher says so.
   */
  readonly minMemoryBytes?: number;
  /** Digest of everything the image was built from; a rebuild with the same digest is skipped. */
  readonly inputsDigest: string;
  /** Where the contents came from (Debian packages with versions, or a file). */
  readonly sources: readonly { readonly name: string; readonly version: string }[];
  readonly builtAt: string;
}

/** The default store root: `<project>/.data/images`, overridden by `KVT_IMAGE_STORE`. */
export function defaultStoreRoot(): string {
  const fromEnv = process.env.KVT_IMAGE_STORE;
  if (fromEnv) return resolve(fromEnv);
  return new URL("../../../.data/images", import.meta.url).pathname;
}

/** A parsed image reference. */
export interface ImageRef {
  readonly repository: string;
  readonly tag: string;
}

/** Parses `local/demo-linux:latest` (tag optional). Rejects anything that could escape the store. */
export function parseImageRef(ref: string): ImageRef {
  const m =
    /^([a-z0-9]+(?:[._-][a-z0-9]+)*(?:\/[a-z0-9]+(?:[._-][a-z0-9]+)*)*)(?::([A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?$/.exec(
      ref,
    );
  if (!m?.[1]) throw new Error(`invalid image reference "${ref}" (expected e.g. local/demo-linux:latest)`);
  return { repository: m[1], tag: m[2] ?? "latest" };
}

/** The directory of an image in the store. */
export function imageDir(storeRoot: string, ref: string): string {
  const r = parseImageRef(ref);
  return join(storeRoot, ...r.repository.split("/"), r.tag);
}

/** Reads an image's manifest, or undefined when the image is not (completely) stored. */
export function readManifest(storeRoot: string, ref: string): ImageManifest | undefined {
  const file = join(imageDir(storeRoot, ref), "image.json");
  if (!existsSync(file)) return undefined;
  try {
    const m = JSON.parse(readFileSync(file, "utf8")) as ImageManifest;
    return m.schemaVersion === 1 ? m : undefined;
  } catch {
    return undefined;
  }
}

/** True when the stored image was built from `inputsDigest` and its files are all present. */
export function isCurrent(storeRoot: string, ref: string, inputsDigest: string): boolean {
  const m = readManifest(storeRoot, ref);
  if (m?.inputsDigest !== inputsDigest) return false;
  const dir = imageDir(storeRoot, ref);
  return [m.kernel, m.uncompressedKernel, m.initrd, m.disk].every(
    (file) => file === undefined || existsSync(join(dir, file)),
  );
}

/** A file too large to hold in memory (a disk image), moved into the image directory by rename (same filesystem). */
export interface MovedFile {
  readonly moveFrom: string;
}

/**
 * Stores an image: writes its files (or moves them in), then the manifest (atomically, by rename) so a reader never
 * sees a manifest pointing at missing files. The old manifest goes first, so a half-replaced image is never current.
 */
export function writeImage(
  storeRoot: string,
  manifest: ImageManifest,
  files: ReadonlyMap<string, Uint8Array | MovedFile>,
): string {
  const dir = imageDir(storeRoot, manifest.image);
  mkdirSync(dir, { recursive: true });
  rmSync(join(dir, "image.json"), { force: true });
  for (const [name, data] of files) {
    if (name.includes("/") || name === "image.json") throw new Error(`invalid image file name "${name}"`);
    if ("moveFrom" in data) renameSync(data.moveFrom, join(dir, name));
    else {
      writeFileSync(join(dir, `${name}.tmp`), data);
      renameSync(join(dir, `${name}.tmp`), join(dir, name));
    }
  }
  writeFileSync(join(dir, "image.json.tmp"), `${JSON.stringify(manifest, null, 2)}\n`);
  renameSync(join(dir, "image.json.tmp"), join(dir, "image.json"));
  return dir;
}

/**
 * The machine's cache of built images (machine-cache.ts, kind `images`): a fresh clone of the project (each CI run)
 * takes an image another clone built from the same inputs with the same builder code instead of building it again.
 * `builderSources` are the files of the code that builds it; the key digests them with the reference and the image's
 * inputs digest, so any change to either builds afresh.
 */
export interface MachineImage {
  readonly ref: string;
  readonly inputsDigest: string;
  readonly builderSources: readonly string[];
}

const imagesCache = (log: (line: string) => void) => machineCache("images", { keep: 4, log });
const imageKey = (m: MachineImage): string => machineCacheKey([m.ref, m.inputsDigest], m.builderSources);

/** Restores `image` from the machine's cache into the store; its manifest, or undefined when the machine lacks it. */
export function restoreMachineImage(
  storeRoot: string,
  image: MachineImage,
  log: (line: string) => void = () => {},
): ImageManifest | undefined {
  const staging = join(storeRoot, ".cache", `restore-${process.pid}`);
  rmSync(staging, { recursive: true, force: true });
  try {
    if (!imagesCache(log).restore(imageKey(image), staging)) return undefined;
    const manifest = JSON.parse(readFileSync(join(staging, "image.json"), "utf8")) as ImageManifest;
    if (manifest.image !== image.ref || manifest.inputsDigest !== image.inputsDigest) return undefined;
    const files = new Map<string, MovedFile>();
    for (const name of readdirSync(staging)) {
      if (name !== "image.json") files.set(name, { moveFrom: join(staging, name) });
    }
    writeImage(storeRoot, manifest, files);
    return isCurrent(storeRoot, image.ref, image.inputsDigest) ? manifest : undefined;
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

/** Saves the stored `image` (complete and current) to the machine's cache, unless the machine has it. */
export function saveMachineImage(storeRoot: string, image: MachineImage, log: (line: string) => void = () => {}): void {
  if (!isCurrent(storeRoot, image.ref, image.inputsDigest)) return;
  imagesCache(log).save(imageKey(image), imageDir(storeRoot, image.ref), (rel) => !rel.endsWith(".tmp"));
}
