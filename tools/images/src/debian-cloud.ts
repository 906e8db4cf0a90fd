/**
 * Builds `local/debian-cloud:latest`: a real Debian 12 guest (systemd, cloud-init, openssh-server, fio) from Debian's
 * archive only, as a containerDisk with its root filesystem on a raw ext4 disk and its kernel and initrd beside it for
 * direct kernel boot (`root=/dev/vda`: the containerDisk is the VMI's first disk).
 *
 *   apt-cache (versions of the key packages) -> digest == stored? -> skip
 *     -> mmdebstrap bookworm (debs cached in <store>/.cache/debian-cloud-debs) -> customize hook (guest/debian-cloud/
 *        customize.sh: cloud-init NoCloud config, boot marker unit, initramfs modules, fstab, no baked host keys)
 *     -> /boot/vmlinuz + initrd.img out (+ vmlinux unpacked) -> mkfs.ext4 -d rootfs disk.img (sparse) -> store
 *
 * cloud-init reads only a NoCloud seed labelled `cidata` (datasource_list [ NoCloud, None ]); its default user is
 * Debian's `debian`, which gets the user data's `ssh_authorized_keys`. The boot marker is printed on the console by a
 * systemd unit ordered after cloud-final, so it also says the user data has been applied.
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { gunzipSync } from "node:zlib";
import { listCpio } from "./cpio.ts";
import { type DebianPackage, DebianToolError, resolveMetaPackage, resolvePackages } from "./debian.ts";
import { ensureHostTools } from "./host-tools.ts";
import {
  defaultStoreRoot,
  type ImageManifest,
  imageDir,
  isCurrent,
  type MovedFile,
  readManifest,
  restoreMachineImage,
  saveMachineImage,
  writeImage,
} from "./store.ts";
import { tryExtractVmlinux } from "./vmlinux.ts";

/** The reference the Debian image is stored under. */
export const DEBIAN_CLOUD_IMAGE = "local/debian-cloud:latest";
/** The line the guest prints on its console once up and cloud-init has finished (followed by details). */
export const DEBIAN_CLOUD_BOOT_MARKER = "KVT_DEBIAN_CLOUD_BOOTED";
/** The kernel command line: root on the first virtio disk (the containerDisk); `quiet` keeps the serial console short. */
export const DEBIAN_CLOUD_CMDLINE = "root=/dev/vda rw console=ttyS0 quiet panic=-1";
/** systemd, cloud-init (python3) and sshd boot comfortably in this much. */
export const DEBIAN_CLOUD_MIN_MEMORY_BYTES = 512 * 1024 * 1024;
/** The raw disk's size (sparse; the root filesystem fills it). */
export const DEBIAN_CLOUD_DISK_BYTES = 1024 * 1024 * 1024;
/** The Debian suite and archive the image comes from. */
export const DEBIAN_CLOUD_SUITE = "bookworm";
const MIRRORS = [
  "deb http://deb.debian.org/debian bookworm main",
  "deb http://deb.debian.org/debian bookworm-updates main",
  "deb http://deb.debian.org/debian-security bookworm-security main",
];
/**
 * Installed on top of mmdebstrap's `apt` variant (Essential: yes + apt). Recommends are not installed. ifupdown and
 * isc-dhcp-client are what cloud-init renders a network config for; sudo for the default user's sudoers entry.
 */
export const DEBIAN_CLOUD_PACKAGES = [
  "systemd-sysv",
  "udev",
  "dbus",
  "linux-image-amd64",
  "initramfs-tools",
  "cloud-init",
  "openssh-server",
  "fio",
  "sudo",
  "e2fsprogs",
  "kmod",
  "iproute2",
  "ifupdown",
  "isc-dhcp-client",
  "netbase",
];
/** Packages whose versions key the cache (a new version of any of them rebuilds the image). */
const KEY_PACKAGES = ["systemd", "cloud-init", "openssh-server", "fio", "initramfs-tools", "libc6"];
/** Kernel module trees a VM never loads, left out of the image (dpkg path-exclude) to keep the disk small. */
const EXCLUDED_MODULE_TREES = [
  "drivers/gpu",
  "drivers/media",
  "drivers/net/wireless",
  "drivers/net/ethernet",
  "drivers/infiniband",
  "drivers/staging",
  "drivers/bluetooth",
  "drivers/iio",
  "drivers/isdn",
  "sound",
  "net/wireless",
  "net/mac80211",
  "net/bluetooth",
  "drivers/usb",
  "drivers/net/usb",
  "drivers/net/can",
  "drivers/comedi",
  "drivers/mtd",
  "drivers/hwmon",
  "drivers/target",
  // Host-adapter drivers live in subdirectories; virtio_scsi, sd_mod and the like at the top stay.
  "drivers/scsi/*",
];
/** Bump when the build changes in a way the versions and guest files do not capture. */
const BUILDER_REVISION = "2";
/** The code that builds the image: with the inputs digest, the key of its copy in the machine's cache. */
const BUILDER_SOURCES = ["debian-cloud.ts", "cpio.ts", "debian.ts", "store.ts", "vmlinux.ts"].map(
  (f) => new URL(f, import.meta.url).pathname,
);

/** Options for {@link buildDebianCloud}. */
export interface DebianCloudOptions {
  /** Store root; default {@link defaultStoreRoot}. */
  readonly storeRoot?: string;
  /** Rebuild even when the stored image is current. */
  readonly force?: boolean;
  /** Progress lines (mmdebstrap's `I:` lines among them). */
  readonly log?: (line: string) => void;
}

/** What a build did. */
export interface DebianCloudResult {
  readonly dir: string;
  readonly manifest: ImageManifest;
  /** True when the stored image was current and nothing was rebuilt. */
  readonly skipped: boolean;
}

const GUEST_DIR = new URL("./guest/debian-cloud/", import.meta.url).pathname;

/** The dpkg options that keep docs, man pages, translations and unused module trees out of the root filesystem. */
export function dpkgExcludes(): string[] {
  const paths = ["/usr/share/doc/*", "/usr/share/man/*", "/usr/share/locale/*", "/usr/share/info/*"];
  for (const tree of EXCLUDED_MODULE_TREES)
    for (const lib of ["/lib", "/usr/lib"]) paths.push(`${lib}/modules/*/kernel/${tree}/*`);
  return [
    ...paths.map((p) => `--dpkgopt=path-exclude=${p}`),
    // Licences stay (Debian's policy for trimmed images).
    "--dpkgopt=path-include=/usr/share/doc/*/copyright",
  ];
}

/** mmdebstrap's arguments for a root filesystem in `target`, with the .deb cache `debCache` reused and refilled. */
export function mmdebstrapArgs(target: string, debCache: string, marker = DEBIAN_CLOUD_BOOT_MARKER): string[] {
  return [
    "--variant=apt",
    "--mode=root",
    `--include=${DEBIAN_CLOUD_PACKAGES.join(",")}`,
    ...dpkgExcludes(),
    // Reuse the debs of an earlier build (apt downloads only what changed), and keep what this one fetched.
    `--setup-hook=mkdir -p "$1/var/cache/apt/archives"`,
    `--setup-hook=sync-in ${debCache} /var/cache/apt/archives`,
    "--skip=download/empty",
    "--skip=essential/unlink",
    `--customize-hook=sh ${join(GUEST_DIR, "customize.sh")} "$1" ${marker}`,
    `--customize-hook=sync-out /var/cache/apt/archives ${debCache}`,
    DEBIAN_CLOUD_SUITE,
    target,
    ...MIRRORS,
  ];
}

function guestFiles(): [string, Buffer][] {
  return readdirSync(GUEST_DIR)
    .sort()
    .map((name) => [name, readFileSync(join(GUEST_DIR, name))]);
}

function digestOf(parts: readonly (string | Uint8Array)[]): string {
  const h = createHash("sha256");
  for (const p of parts) {
    h.update(p);
    h.update("\0");
  }
  return `sha256:${h.digest("hex")}`;
}

/** Runs a command, its output lines to `log` (prefixed), failing with the last lines when it exits non-zero. */
function runLogged(cmd: string, args: readonly string[], log: (line: string) => void, prefix: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"] });
    const tail: string[] = [];
    for (const s of [child.stdout, child.stderr])
      createInterface({ input: s }).on("line", (line) => {
        tail.push(line);
        if (tail.length > 20) tail.shift();
        if (/^[IEW]: /.test(line) || prefix !== "mmdebstrap") log(`${prefix}: ${line}`);
      });
    child.on("error", (err) => reject(new DebianToolError(`cannot run ${cmd}: ${err.message}`)));
    child.on("exit", (code) => {
      if (code === 0) resolve();
      else reject(new DebianToolError(`${cmd} exited with ${code}: ${tail.join(" | ")}`));
    });
  });
}

/** Mount points at or under `dir` (a hook that died may leave /proc or /dev mounted in the root filesystem). */
function mountsUnder(dir: string): string[] {
  const mounts = readFileSync("/proc/self/mounts", "utf8").split("\n");
  return mounts.map((l) => l.split(" ")[1] ?? "").filter((m) => m === dir || m.startsWith(`${dir}/`));
}

/** Removes the work directory unless something is still mounted in it (never delete through a bind mount of /dev). */
function removeWork(work: string, log: (line: string) => void): void {
  const mounted = mountsUnder(work);
  if (mounted.length > 0) {
    log(`leaving ${work} in place: still mounted there: ${mounted.join(", ")}`);
    return;
  }
  rmSync(work, { recursive: true, force: true });
}

/** Modules the initrd must hold to mount `root=/dev/vda` (virtio-blk on PCI, ext4). */
const ROOT_MODULES = ["virtio_pci.ko", "virtio_blk.ko", "ext4.ko"];

/**
 * The file names in a gzip'd newc initrd (what COMPRESS=gzip makes; an uncompressed early cpio in front is skipped
 * by looking for the gzip magic). Throws when there is no gzip member.
 */
export function initrdFiles(initrd: Uint8Array): string[] {
  const buf = Buffer.from(initrd.buffer, initrd.byteOffset, initrd.byteLength);
  const at = buf.indexOf(Buffer.from([0x1f, 0x8b, 0x08]));
  if (at < 0) throw new DebianToolError("the initrd has no gzip member (initramfs-tools COMPRESS changed?)");
  return listCpio(gunzipSync(buf.subarray(at))).map((e) => e.path);
}

/** Fails the build when the initrd cannot mount the root disk (a module missing). */
function checkInitrd(initrd: Uint8Array): string[] {
  const files = initrdFiles(initrd);
  const missing = ROOT_MODULES.filter((m) => !files.some((f) => f.endsWith(`/${m}`)));
  if (missing.length > 0) throw new DebianToolError(`the initrd lacks ${missing.join(", ")}: root=/dev/vda would fail`);
  return files.filter((f) => f.endsWith(".ko")).map((f) => f.slice(f.lastIndexOf("/") + 1, -3));
}

function bootFile(rootfs: string, prefix: string, kernelVersion: string): string {
  const path = join(rootfs, "boot", `${prefix}-${kernelVersion}`);
  if (!existsSync(path)) throw new DebianToolError(`the root filesystem has no /boot/${prefix}-${kernelVersion}`);
  return path;
}

/**
 * Builds (or finds current) `local/debian-cloud:latest` in the store. Needs root (mmdebstrap's root mode, chroot for
 * update-initramfs); installs mmdebstrap and e2fsprogs with apt-get when missing.
 */
export async function buildDebianCloud(options: DebianCloudOptions = {}): Promise<DebianCloudResult> {
  const storeRoot = options.storeRoot ?? defaultStoreRoot();
  const log = options.log ?? ((): void => {});
  const named = await resolvePackages(["linux-image-amd64", ...KEY_PACKAGES]);
  const kernelPkg = await resolveMetaPackage("linux-image-amd64", /^linux-image-\d.*-amd64$/);
  const keys: DebianPackage[] = [kernelPkg, ...named.slice(1)];
  const digest = digestOf([
    BUILDER_REVISION,
    ...keys.map((p) => `${p.name}=${p.version}`),
    DEBIAN_CLOUD_PACKAGES.join(","),
    EXCLUDED_MODULE_TREES.join(","),
    MIRRORS.join(","),
    DEBIAN_CLOUD_CMDLINE,
    String(DEBIAN_CLOUD_DISK_BYTES),
    ...guestFiles().flat(),
  ]);
  const stored = readManifest(storeRoot, DEBIAN_CLOUD_IMAGE);
  const machine = { ref: DEBIAN_CLOUD_IMAGE, inputsDigest: digest, builderSources: BUILDER_SOURCES };
  if (!options.force && stored && isCurrent(storeRoot, DEBIAN_CLOUD_IMAGE, digest)) {
    log(`${DEBIAN_CLOUD_IMAGE} is current (${kernelPkg.name}, cloud-init ${keys[2]?.version}); nothing to do`);
    saveMachineImage(storeRoot, machine, log);
    return { dir: imageDir(storeRoot, DEBIAN_CLOUD_IMAGE), manifest: stored, skipped: true };
  }
  const restored = options.force ? undefined : restoreMachineImage(storeRoot, machine, log);
  if (restored) return { dir: imageDir(storeRoot, DEBIAN_CLOUD_IMAGE), manifest: restored, skipped: true };
  if (typeof process.getuid === "function" && process.getuid() !== 0)
    throw new DebianToolError(`building ${DEBIAN_CLOUD_IMAGE} needs root (mmdebstrap --mode=root, chroot)`);
  await ensureHostTools(
    [
      { bin: "mmdebstrap", pkg: "mmdebstrap" },
      { bin: "mkfs.ext4", pkg: "e2fsprogs" },
    ],
    log,
  );
  const kernelVersion = kernelPkg.name.slice("linux-image-".length);
  const debCache = join(storeRoot, ".cache", "debian-cloud-debs");
  mkdirSync(debCache, { recursive: true });
  const work = join(storeRoot, ".cache", `debian-cloud-work-${process.pid}`);
  const rootfs = join(work, "rootfs");
  mkdirSync(work, { recursive: true });
  const t0 = Date.now();
  try {
    log(`mmdebstrap ${DEBIAN_CLOUD_SUITE} with ${DEBIAN_CLOUD_PACKAGES.join(" ")} (debs cached in ${debCache})`);
    await runLogged("mmdebstrap", mmdebstrapArgs(rootfs, debCache), log, "mmdebstrap");
    log(`root filesystem ready after ${((Date.now() - t0) / 1000).toFixed(0)} s`);
    const vmlinuz = readFileSync(bootFile(rootfs, "vmlinuz", kernelVersion));
    const initrd = readFileSync(bootFile(rootfs, "initrd.img", kernelVersion));
    log(`initrd modules: ${checkInitrd(initrd).join(" ")}`);
    log("extracting the uncompressed kernel (vmlinux) for direct boot");
    const vmlinux = await tryExtractVmlinux(vmlinuz, log);
    const disk = join(work, "disk.img");
    log(`mkfs.ext4 -d: a ${DEBIAN_CLOUD_DISK_BYTES / 1048576} MiB sparse raw disk from the root filesystem`);
    await runLogged(
      "mkfs.ext4",
      ["-q", "-F", "-L", "rootfs", "-d", rootfs, "-E", "root_owner=0:0", disk, `${DEBIAN_CLOUD_DISK_BYTES / 1024}k`],
      log,
      "mkfs.ext4",
    );
    const manifest: ImageManifest = {
      schemaVersion: 1,
      image: DEBIAN_CLOUD_IMAGE,
      kernel: "vmlinuz",
      ...(vmlinux ? { uncompressedKernel: "vmlinux" } : {}),
      initrd: "initrd.img",
      disk: "disk.img",
      cmdline: DEBIAN_CLOUD_CMDLINE,
      pvmSafe: false,
      bootMarker: DEBIAN_CLOUD_BOOT_MARKER,
      minMemoryBytes: DEBIAN_CLOUD_MIN_MEMORY_BYTES,
      inputsDigest: digest,
      sources: keys,
      builtAt: new Date().toISOString(),
    };
    const dir = writeImage(
      storeRoot,
      manifest,
      new Map<string, Uint8Array | MovedFile>([
        ["vmlinuz", vmlinuz],
        ...(vmlinux ? ([["vmlinux", vmlinux]] as const) : []),
        ["initrd.img", initrd],
        ["disk.img", { moveFrom: disk }],
      ]),
    );
    saveMachineImage(storeRoot, machine, log);
    const used = statSync(join(dir, "disk.img")).blocks * 512;
    log(
      `built ${DEBIAN_CLOUD_IMAGE} in ${dir} after ${((Date.now() - t0) / 1000).toFixed(0)} s (disk ` +
        `${DEBIAN_CLOUD_DISK_BYTES / 1048576} MiB, ${(used / 1048576).toFixed(0)} MiB allocated; initrd ` +
        `${(initrd.length / 1048576).toFixed(1)} MiB)`,
    );
    return { dir, manifest, skipped: false };
  } finally {
    removeWork(work, log);
  }
}
