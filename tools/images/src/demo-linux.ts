/**
 * Builds `local/demo-linux:latest` from Debian packages only: the kernel of `linux-image-amd64` (resolved to the
 * real versioned package) and a busybox-static initramfs whose /init mounts the usual filesystems, loads the modules
 * it needs to read a NoCloud `cidata` seed (virtio-blk, iso9660, vfat; from the same kernel package), prints the boot
 * marker, and hands over to busybox init: user data once, a shell on ttyS0, power-off on Ctrl-Alt-Del, and an SSH
 * server (dropbear, ssh-server.ts) whose authorized keys come from the seed (cloud-config `ssh_authorized_keys`, or
 * the meta-data `public-keys` KubeVirt writes for accessCredentials). iperf3 (net-tools.ts) is there for the network
 * bench.
 *
 *   apt-cache (versions) -> digest == stored? -> skip
 *                        -> apt-get download -> dpkg -x -> pick modules (+deps), SSH server and iperf3 (+libs)
 *                        -> cpio -> store
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { type CpioEntry, writeCpio } from "./cpio.ts";
import { downloadPackage, extractPackage, resolveMetaPackage, resolvePackages } from "./debian.ts";
import { ensureHostTools } from "./host-tools.ts";
import { parseBuiltin, resolveModules } from "./kmod.ts";
import { NET_TOOL_PACKAGES, NET_TOOL_PROGRAMS } from "./net-tools.ts";
import { type ProgramFiles, programFiles } from "./program-files.ts";
import { SSH_SERVER_PACKAGES, SSH_SERVER_PROGRAMS } from "./ssh-server.ts";
import {
  defaultStoreRoot,
  type ImageManifest,
  imageDir,
  isCurrent,
  readManifest,
  restoreMachineImage,
  saveMachineImage,
  writeImage,
} from "./store.ts";
import { tryExtractVmlinux } from "./vmlinux.ts";

const run = promisify(execFile);

/** The reference the demo image is stored under. */
export const DEMO_LINUX_IMAGE = "local/demo-linux:latest";
/** The line the demo image's init prints on the console once booted (followed by details). */
export const DEMO_BOOT_MARKER = "KVT_DEMO_LINUX_BOOTED";
/** Debian's kernel with this initramfs needs about this much to boot (measured: 62 MiB hangs decompressing, 128 MiB boots). */
export const DEMO_MIN_MEMORY_BYTES = 128 * 1024 * 1024;
/** The demo image's default kernel command line (backends add their console= when missing). */
export const DEMO_CMDLINE = "console=ttyS0 quiet panic=-1";
/**
 * Modules the init loads (dependencies are added): virtio (PCI and MMIO) block devices and NICs (virtio_net brings
 * failover and net_failover), SATA (AHCI) and SCSI disks and CD-ROMs as KubeVirt's sata/scsi buses give them on QEMU,
 * iso9660 and vfat seeds, the ACPI power button.
 */
export const DEMO_MODULES = [
  "virtio_pci",
  "virtio_mmio",
  "virtio_blk",
  "virtio_scsi",
  "ahci",
  "sd_mod",
  "sr_mod",
  "virtio_net",
  "isofs",
  "vfat",
  "nls_cp437",
  "nls_ascii",
  "nls_utf8",
  "button",
  "evdev",
];
/** Bump when the build changes in a way the package versions and guest files do not capture. */
const BUILDER_REVISION = "5";
/** The code that builds the image: with the inputs digest, the key of its copy in the machine's cache. */
const BUILDER_SOURCES = [
  "demo-linux.ts",
  "cpio.ts",
  "debian.ts",
  "elf-deps.ts",
  "kmod.ts",
  "net-tools.ts",
  "program-files.ts",
  "ssh-server.ts",
  "store.ts",
  "vmlinux.ts",
].map((f) => new URL(f, import.meta.url).pathname);

/** Options for {@link buildDemoLinux}. */
export interface BuildOptions {
  /** Store root; default {@link defaultStoreRoot}. */
  readonly storeRoot?: string;
  /** Rebuild even when the stored image is current. */
  readonly force?: boolean;
  /** Progress lines. */
  readonly log?: (line: string) => void;
}

/** What a build did. */
export interface BuildResult {
  readonly dir: string;
  readonly manifest: ImageManifest;
  /** True when the stored image was current and nothing was rebuilt. */
  readonly skipped: boolean;
}

function guestFile(name: string): Buffer {
  return readFileSync(new URL(`./guest/${name}`, import.meta.url));
}

function guestFiles(): Map<string, Buffer> {
  const init = guestFile("init.sh").toString("utf8").replaceAll("@@BOOT_MARKER@@", DEMO_BOOT_MARKER);
  return new Map([
    ["init", Buffer.from(init)],
    ["etc/inittab", guestFile("inittab")],
    ["etc/profile", guestFile("profile")],
    ["sbin/kvt-cloud-init", guestFile("cloud-init.sh")],
    ["etc/acpi/PWRF/00000080", guestFile("acpi-power-button.sh")],
    ["usr/share/kvt/cloud-config.awk", guestFile("cloud-config.awk")],
    ["usr/share/kvt/public-keys.awk", guestFile("public-keys.awk")],
  ]);
}

function digestOf(parts: readonly (string | Uint8Array)[]): string {
  const h = createHash("sha256");
  for (const p of parts) {
    h.update(p);
    h.update("\0");
  }
  return `sha256:${h.digest("hex")}`;
}

async function busyboxApplets(busybox: string): Promise<string[]> {
  const { stdout } = await run(busybox, ["--list-full"]);
  return stdout
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.includes(".."));
}

function parentsOf(path: string): string[] {
  const parts = path.split("/").slice(0, -1);
  return parts.map((_, i) => parts.slice(0, i + 1).join("/"));
}

/** Assembles the initramfs entries: directories first, then busybox + applet links, modules, init scripts. */
function initramfsEntries(input: {
  busybox: Uint8Array;
  applets: readonly string[];
  kernelVersion: string;
  modules: ReadonlyMap<string, Uint8Array>;
  files: ReadonlyMap<string, Uint8Array>;
  programs: ProgramFiles;
}): CpioEntry[] {
  const entries: CpioEntry[] = [];
  const dirs = new Set<string>();
  const addDir = (d: string): void => {
    for (const p of [...parentsOf(`${d}/x`)]) {
      if (!dirs.has(p)) {
        dirs.add(p);
        entries.push({ kind: "dir", path: p });
      }
    }
  };
  for (const d of [
    "bin",
    "sbin",
    "usr/bin",
    "usr/sbin",
    "dev",
    "proc",
    "sys",
    "run",
    "tmp",
    "root",
    "etc/kvt",
    "etc/dropbear",
    "var/log",
  ])
    addDir(d);
  entries.push({ kind: "chardev", path: "dev/console", major: 5, minor: 1 });
  entries.push({ kind: "chardev", path: "dev/null", major: 1, minor: 3, mode: 0o666 });
  entries.push({ kind: "file", path: "bin/busybox", data: input.busybox, mode: 0o755 });
  for (const a of input.applets) {
    if (a === "bin/busybox") continue;
    for (const p of parentsOf(a)) addDir(p);
    const depth = a.split("/").length - 1;
    entries.push({ kind: "symlink", path: a, target: `${"../".repeat(depth)}bin/busybox` });
  }
  const modDir = `lib/modules/${input.kernelVersion}`;
  const order: string[] = [];
  for (const [rel, data] of input.modules) {
    for (const p of parentsOf(`${modDir}/${rel}`)) addDir(p);
    entries.push({ kind: "file", path: `${modDir}/${rel}`, data });
    order.push(rel);
  }
  entries.push({ kind: "file", path: "etc/kvt/modules", data: Buffer.from(`${order.join("\n")}\n`) });
  entries.push({ kind: "file", path: "etc/passwd", data: Buffer.from("root:x:0:0:root:/root:/bin/sh\n") });
  entries.push({ kind: "file", path: "etc/group", data: Buffer.from("root:x:0:\n") });
  for (const [path, data] of input.files) {
    for (const p of parentsOf(path)) addDir(p);
    const exec = path === "init" || path.startsWith("sbin/") || path.startsWith("etc/acpi/");
    entries.push({ kind: "file", path, data, mode: exec ? 0o755 : 0o644 });
  }
  // The SSH server and iperf3: programs and their shared libraries (all executable, as Debian installs ld.so), the
  // loader link.
  for (const [path, data] of input.programs.files) {
    for (const p of parentsOf(path)) addDir(p);
    entries.push({ kind: "file", path, data, mode: 0o755 });
  }
  for (const [path, target] of input.programs.symlinks) {
    for (const p of parentsOf(path)) addDir(p);
    entries.push({ kind: "symlink", path, target });
  }
  return entries;
}

/** The Debian packages the demo image is built from (their candidate versions), its files, and their digest. */
async function demoInputs() {
  // The metapackage's record comes with the others' in one apt-cache call; its kernel package takes a second.
  const [, busyboxPkg, ...programPkgs] = await resolvePackages([
    "linux-image-amd64",
    "busybox-static",
    ...SSH_SERVER_PACKAGES,
    ...NET_TOOL_PACKAGES,
  ]);
  if (!busyboxPkg) throw new Error("unreachable: resolvePackages returns one package per name");
  const kernelPkg = await resolveMetaPackage("linux-image-amd64", /^linux-image-\d.*-amd64$/);
  const kernelVersion = kernelPkg.name.slice("linux-image-".length);
  const files = guestFiles();
  const digest = digestOf([
    BUILDER_REVISION,
    `${kernelPkg.name}=${kernelPkg.version}`,
    `${busyboxPkg.name}=${busyboxPkg.version}`,
    ...programPkgs.map((p) => `${p.name}=${p.version}`),
    DEMO_CMDLINE,
    DEMO_MODULES.join(","),
    ...[...files].flat(),
  ]);
  return { kernelPkg, busyboxPkg, programPkgs, kernelVersion, files, digest };
}

/**
 * Builds (or finds current) `local/demo-linux:latest` in the store. Needs apt-get, apt-cache and dpkg; installs
 * them when root, else fails naming the command. Downloads are cached under `<store>/.cache/debs`.
 */
export async function buildDemoLinux(options: BuildOptions = {}): Promise<BuildResult> {
  const storeRoot = options.storeRoot ?? defaultStoreRoot();
  const log = options.log ?? ((): void => {});
  await ensureHostTools(
    [
      { bin: "apt-get", pkg: "apt" },
      { bin: "apt-cache", pkg: "apt" },
      { bin: "dpkg", pkg: "dpkg" },
    ],
    log,
  );
  const { kernelPkg, busyboxPkg, programPkgs, kernelVersion, files, digest } = await demoInputs();
  const stored = readManifest(storeRoot, DEMO_LINUX_IMAGE);
  const machine = { ref: DEMO_LINUX_IMAGE, inputsDigest: digest, builderSources: BUILDER_SOURCES };
  // A store built before the image carried the uncompressed kernel (or without the decompressor) is rebuilt, so it
  // gets one now that it can.
  if (!options.force && stored?.uncompressedKernel && isCurrent(storeRoot, DEMO_LINUX_IMAGE, digest)) {
    log(`${DEMO_LINUX_IMAGE} is current (${kernelPkg.name} ${kernelPkg.version}); nothing to do`);
    saveMachineImage(storeRoot, machine, log);
    return { dir: imageDir(storeRoot, DEMO_LINUX_IMAGE), manifest: stored, skipped: true };
  }
  const restored = options.force ? undefined : restoreMachineImage(storeRoot, machine, log);
  if (restored?.uncompressedKernel) {
    return { dir: imageDir(storeRoot, DEMO_LINUX_IMAGE), manifest: restored, skipped: true };
  }
  const debs = join(storeRoot, ".cache", "debs");
  mkdirSync(debs, { recursive: true });
  log(`downloading ${kernelPkg.name} ${kernelPkg.version} and ${busyboxPkg.name} ${busyboxPkg.version}`);
  const kernelDeb = await downloadPackage(kernelPkg, debs);
  const busyboxDeb = await downloadPackage(busyboxPkg, debs);
  log(`downloading the SSH server and iperf3: ${programPkgs.map((p) => `${p.name} ${p.version}`).join(", ")}`);
  const programDebs: string[] = [];
  for (const p of programPkgs) programDebs.push(await downloadPackage(p, debs));
  const work = join(storeRoot, ".cache", `work-${process.pid}`);
  try {
    log("unpacking");
    await extractPackage(kernelDeb, join(work, "kernel"));
    await extractPackage(busyboxDeb, join(work, "busybox"));
    const programRoots = programPkgs.map((p) => join(work, "programs", p.name));
    for (const [i, root] of programRoots.entries()) await extractPackage(programDebs[i] ?? "", root);
    const programs = programFiles(programRoots, [...SSH_SERVER_PROGRAMS, ...NET_TOOL_PROGRAMS]);
    const modulesDir = join(work, "kernel", "lib", "modules", kernelVersion);
    const builtinFile = join(modulesDir, "modules.builtin");
    const builtin = parseBuiltin(existsSync(builtinFile) ? readFileSync(builtinFile, "utf8") : "");
    const mods = resolveModules(modulesDir, DEMO_MODULES, builtin);
    log(`modules: ${mods.map((m) => m.name).join(" ")}`);
    const busyboxBin = join(work, "busybox", "bin", "busybox");
    const entries = initramfsEntries({
      busybox: readFileSync(busyboxBin),
      applets: await busyboxApplets(busyboxBin),
      kernelVersion,
      modules: new Map(mods.map((m) => [m.relPath, readFileSync(join(modulesDir, m.relPath))])),
      files,
      programs,
    });
    const initrd = writeCpio(entries);
    const vmlinuz = join(work, "vmlinuz");
    copyFileSync(join(work, "kernel", "boot", `vmlinuz-${kernelVersion}`), vmlinuz);
    log("extracting the uncompressed kernel (vmlinux) for direct boot");
    const vmlinux = await tryExtractVmlinux(readFileSync(vmlinuz), log);
    const manifest: ImageManifest = {
      schemaVersion: 1,
      image: DEMO_LINUX_IMAGE,
      kernel: "vmlinuz",
      ...(vmlinux ? { uncompressedKernel: "vmlinux" } : {}),
      initrd: "initrd.img",
      cmdline: DEMO_CMDLINE,
      pvmSafe: false,
      bootMarker: DEMO_BOOT_MARKER,
      minMemoryBytes: DEMO_MIN_MEMORY_BYTES,
      inputsDigest: digest,
      sources: [kernelPkg, busyboxPkg, ...programPkgs],
      builtAt: new Date().toISOString(),
    };
    const dir = writeImage(
      storeRoot,
      manifest,
      new Map([
        ["vmlinuz", readFileSync(vmlinuz)],
        ...(vmlinux ? ([["vmlinux", vmlinux]] as const) : []),
        ["initrd.img", initrd],
      ]),
    );
    log(`built ${DEMO_LINUX_IMAGE} in ${dir} (initrd ${(initrd.length / 1048576).toFixed(1)} MiB)`);
    saveMachineImage(storeRoot, machine, log);
    return { dir, manifest, skipped: false };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
