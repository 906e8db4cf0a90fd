/**
 * Test support only (the launcher never imports it): mounts ISO images with a real Linux guest's isofs - the reader
 * cloud-init's guest uses - when the host kernel has none. A Debian kernel (its isofs.ko, cdrom.ko and loop.ko) and a
 * static busybox boot under QEMU from an initramfs that holds the images; the guest loop-mounts each one and prints
 * every entry's mode, size and SHA-256 on the serial console.
 *
 * Kernel and busybox come from the Debian packages the repository's tools already unpacked under .data/ (the nested
 * lane's debs, the image store's cache), else are fetched with `apt-get download` (root only) into a cache in the
 * temporary directory that outlives the checkout (CI clones afresh each run).
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { ensureHostTools, type HostTool, HostToolError } from "@kvt/runtime";

const repoRoot = new URL("../../../../", import.meta.url).pathname;
const dataDir = join(repoRoot, ".data");
const downloadDir = join(tmpdir(), "kvt-volumes-test-debs");
const QEMU: readonly HostTool[] = [{ bin: "qemu-system-x86_64", pkg: "qemu-system-x86" }];

/** A Debian kernel tree (boot/ and lib/modules/) and a static busybox. */
export interface GuestParts {
  readonly vmlinuz: string;
  readonly modules: string[];
  readonly busybox: string;
}

function kernelIn(root: string): { vmlinuz: string; modules: string[] } | undefined {
  const boot = join(root, "boot");
  const vmlinuz = existsSync(boot) ? readdirSync(boot).find((f) => f.startsWith("vmlinuz-")) : undefined;
  if (!vmlinuz) return undefined;
  const kernel = join(root, "lib/modules", vmlinuz.slice("vmlinuz-".length), "kernel");
  // Load order matters: isofs needs cdrom.
  const modules = ["drivers/block/loop.ko", "drivers/cdrom/cdrom.ko", "fs/isofs/isofs.ko"].map((m) => join(kernel, m));
  return modules.every(existsSync) ? { vmlinuz: join(boot, vmlinuz), modules } : undefined;
}

function subdirs(dir: string): string[] {
  return existsSync(dir) ? readdirSync(dir).map((d) => join(dir, d)) : [];
}

function findParts(): GuestParts | undefined {
  const kernelRoots = [
    ...subdirs(join(dataDir, "nested/debs")).map((d) => join(d, "root")),
    ...subdirs(join(dataDir, "images/.cache")).map((d) => join(d, "kernel")),
    ...subdirs(downloadDir).map((d) => join(d, "root")),
  ];
  const busyboxes = [
    ...subdirs(join(dataDir, "nested/debs")).map((d) => join(d, "root/bin/busybox")),
    ...subdirs(downloadDir).map((d) => join(d, "root/bin/busybox")),
  ];
  const kernel = kernelRoots.map(kernelIn).find((k) => k !== undefined);
  const busybox = busyboxes.find(existsSync);
  return kernel && busybox ? { ...kernel, busybox } : undefined;
}

function run(cmd: string, args: string[], cwd?: string): string | undefined {
  const r = spawnSync(cmd, args, { cwd, encoding: "utf8", maxBuffer: 16 << 20 });
  return r.status === 0 ? r.stdout : undefined;
}

function download(): void {
  const dir = downloadDir;
  mkdirSync(dir, { recursive: true });
  const depends = run("apt-cache", ["depends", "linux-image-amd64"]) ?? "";
  const kernelPkg = /Depends: (linux-image-[0-9][^\s]*-amd64)/.exec(depends)?.[1];
  for (const pkg of [kernelPkg, "busybox-static"]) {
    if (!pkg) continue;
    const target = join(dir, pkg);
    if (existsSync(join(target, "root"))) continue;
    mkdirSync(target, { recursive: true });
    if (run("apt-get", ["download", pkg], target) === undefined) continue;
    const deb = readdirSync(target).find((f) => f.endsWith(".deb"));
    if (deb) run("dpkg", ["-x", deb, "root"], target);
  }
}

/** The guest's parts and QEMU, fetched when root and missing; a string saying why not when they cannot be had. */
export async function guestParts(): Promise<GuestParts | string> {
  try {
    await ensureHostTools(QEMU);
  } catch (err) {
    // Not root (or apt-get failed): the test is skipped with this reason, which names the command to run.
    if (err instanceof HostToolError) return err.message;
    throw err;
  }
  const found = findParts();
  if (found) return found;
  if (process.getuid?.() !== 0)
    return "no Debian kernel with isofs.ko under .data/ and not root to apt-get download one";
  download();
  return findParts() ?? "apt-get download of linux-image-amd64 / busybox-static failed";
}

/** One cpio "newc" archive member. */
interface CpioEntry {
  readonly name: string;
  readonly mode: number;
  readonly data?: Buffer;
}

function cpioNewc(entries: readonly CpioEntry[]): Buffer {
  const parts: Buffer[] = [];
  const pad4 = (n: number): Buffer => Buffer.alloc((4 - (n % 4)) % 4);
  const all = [...entries, { name: "TRAILER!!!", mode: 0 }];
  all.forEach((e, i) => {
    const data = e.data ?? Buffer.alloc(0);
    const fields = [i + 1, e.mode, 0, 0, 1, 0, data.length, 0, 0, 0, 0, e.name.length + 1, 0];
    const header = `070701${fields.map((f) => f.toString(16).padStart(8, "0")).join("")}`;
    const head = Buffer.concat([Buffer.from(header, "ascii"), Buffer.from(`${e.name}\0`, "utf8")]);
    parts.push(head, pad4(head.length), data, pad4(data.length));
  });
  return Buffer.concat(parts);
}

const INIT = `#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t devtmpfs dev /dev
insmod /m/loop.ko; insmod /m/cdrom.ko; insmod /m/isofs.ko
for f in /img/*.iso; do
  mkdir -p /mnt
  if mount -t iso9660 -o loop,ro "$f" /mnt; then
    echo "IMAGE $f"
    cd /mnt
    find . -mindepth 1 | while read -r p; do
      if [ -f "$p" ]; then sum=$(sha256sum "$p" | cut -c1-64); else sum=dir; fi
      echo "ENTRY $(stat -c '%a %s' "$p") $sum $p"
    done
    cd /
    umount /mnt
  else
    echo "MOUNTFAIL $f"
  fi
done
echo "GUEST-DONE"
# poweroff -f does not wait for the UART: what is still in the tty's transmit buffer would be lost (a CI run saw an
# entry cut short by the kernel's "reboot: Power down"). Wait until the transmitted byte count stops moving.
prev=""
while :; do cur=$(grep '^0:' /proc/tty/driver/serial); [ "$cur" = "$prev" ] && break; prev=$cur; sleep 0.2; done
poweroff -f
`;

/** One entry as the guest saw it. */
export interface GuestEntry {
  readonly mode: number;
  readonly size: number;
  /** SHA-256 hex of a file; "dir" for a directory. */
  readonly sha256: string;
}

/**
 * Boots the guest once with `images` (name -> ISO bytes) and returns, per image, every path (relative, "/"-separated)
 * with what Linux's isofs reported, or undefined for an image it refused to mount. Takes a few seconds under TCG.
 */
export function mountInGuest(
  parts: GuestParts,
  images: Record<string, Buffer>,
  scratch: string,
): Map<string, Map<string, GuestEntry> | undefined> {
  const entries: CpioEntry[] = [
    ...["bin", "m", "img", "proc", "dev", "mnt"].map((name) => ({ name, mode: 0o040755 })),
    { name: "init", mode: 0o100755, data: Buffer.from(INIT) },
    { name: "bin/busybox", mode: 0o100755, data: readFileSync(parts.busybox) },
    ...parts.modules.map((m) => ({ name: `m/${m.split("/").pop()}`, mode: 0o100644, data: readFileSync(m) })),
    ...Object.entries(images).map(([name, data]) => ({ name: `img/${name}.iso`, mode: 0o100644, data })),
  ];
  const initrd = join(scratch, "initrd.gz");
  spawnSync("sh", ["-c", `cat > '${initrd}'`], { input: gzipSync(cpioNewc(entries), { level: 1 }) });
  const args = ["-m", "512", "-nographic", "-no-reboot", "-kernel", parts.vmlinuz, "-initrd", initrd];
  const r = spawnSync("qemu-system-x86_64", [...args, "-append", "console=ttyS0 quiet panic=-1"], {
    encoding: "utf8",
    timeout: 240_000,
    maxBuffer: 64 << 20,
  });
  if (!r.stdout.includes("GUEST-DONE")) throw new Error(`the guest did not finish: ${r.stdout.slice(-2000)}`);
  const result = new Map<string, Map<string, GuestEntry> | undefined>();
  let current: Map<string, GuestEntry> | undefined;
  for (const line of r.stdout.split("\n").map((l) => l.replace(/\r+$/, ""))) {
    // The firmware's escape codes may precede the first line.
    const image = /(IMAGE|MOUNTFAIL) \/img\/(.+)\.iso$/.exec(line);
    if (image) {
      current = image[1] === "IMAGE" ? new Map() : undefined;
      result.set(image[2], current);
      continue;
    }
    const entry = /^ENTRY ([0-7]+) (\d+) (\S+) \.\/(.*)$/.exec(line);
    if (entry && current)
      current.set(entry[4], { mode: Number.parseInt(entry[1], 8), size: Number(entry[2]), sha256: entry[3] });
  }
  return result;
}
