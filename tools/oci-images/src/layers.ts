/**
 * What goes into each layer. Layers, bottom up:
 *
 * ```
 * demo-linux,      [containerDisk: /image.json, /boot/vmlinuz, /boot/initrd.img, /disk/* when the image has a disk;
 * test-guest        107:107]
 * virt-launcher:   [app: bundle + addon] -> [qemu: TCG only] -> [base]
 * virt-handler:    [app: bundle (+ addon)] -> [net tools: nsenter, ip, bridge, nft] -> [base]
 * virt-api, virt-controller:  [app: bundle (+ addon when it loads it)] -> [base]
 * base:            glibc's loader and the libraries Node and the addon link to, Node 24 (stripped), /etc/passwd
 * ```
 * No shell, package manager or coreutils in any image: only what the entrypoint runs.
 */
import { existsSync, readdirSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import type { ImageManifest } from "@kvt/images";
import { APP_ROOT, type AppBundle } from "./app-bundle.ts";
import { elfClosure, resolveInRoot } from "./debian-root.ts";
import { run } from "./host-tools.ts";
import type { LayerDir } from "./layer-dir.ts";

/** Node's path in the images. */
export const NODE_PATH = "/usr/local/bin/node";

/** The QEMU binary of the launcher image (on PATH there, as the launcher's QEMU backend expects). */
export const QEMU_PATH = "/usr/bin/qemu-system-x86_64";

/** QEMU's TCG accelerator: a loadable module in Debian's build. */
const QEMU_TCG_MODULE = "/usr/lib/x86_64-linux-gnu/qemu/accel-tcg-x86_64.so";

/**
 * The firmware QEMU loads for the machines the launcher's QEMU backend wires (qemu-args.ts: `pc` with SeaBIOS or
 * `microvm` with qboot, direct kernel boot, virtio-pci devices whose option ROM is iPXE's efi-virtio.rom), at the
 * paths of Debian's build (its firmware path: /usr/share/qemu, /usr/share/seabios, /usr/lib/ipxe/qemu).
 */
const QEMU_FIRMWARE = [
  "/usr/share/seabios/bios-256k.bin",
  "/usr/share/qemu/bios-microvm.bin",
  "/usr/share/qemu/linuxboot.bin",
  "/usr/share/qemu/linuxboot_dma.bin",
  "/usr/share/qemu/multiboot.bin",
  "/usr/share/qemu/multiboot_dma.bin",
  "/usr/share/qemu/pvh.bin",
  "/usr/share/qemu/kvmvapic.bin",
  "/usr/lib/ipxe/qemu/efi-virtio.rom",
];

/** Users of the images: KubeVirt's qemu user (107) runs the launcher, 1001 the control plane, root the handler. */
const PASSWD =
  "root:x:0:0:root:/root:/sbin/nologin\nqemu:x:107:107:qemu:/var/lib/qemu:/sbin/nologin\nkubevirt:x:1001:1001:kubevirt:/tmp:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n";
const GROUP = "root:x:0:\nqemu:x:107:\nkubevirt:x:1001:\nnogroup:x:65534:\n";

/** Copies tree path `path` (symlinks followed inside the tree) to the same path in `layer`. */
function copyFromTree(tree: string, layer: LayerDir, path: string): void {
  const real = resolveInRoot(tree, path);
  if (!real) throw new Error(`Cannot find ${path} in the Debian tree ${tree}`);
  layer.copy(join(tree, real), path);
}

function copyCopyrights(tree: string, layer: LayerDir, packages?: readonly string[]): void {
  const docs = join(tree, "usr/share/doc");
  for (const pkg of packages ?? readdirSync(docs)) {
    const path = `/usr/share/doc/${pkg}/copyright`;
    if (resolveInRoot(tree, path)) copyFromTree(tree, layer, path);
  }
}

/** Stages the base layer: the loader, the libraries `nodeBinary` and `addon` need, Node (stripped), users, /tmp. */
export async function stageBase(tree: string, layer: LayerDir, nodeBinary: string, addon: string): Promise<string[]> {
  const libs = await elfClosure(tree, [], [nodeBinary, addon]);
  for (const lib of libs) copyFromTree(tree, layer, lib);
  layer.mkdir("/usr/local/bin");
  // The npm package's binary carries its symbol table (126 MB); stripped it is 108 MB and runs the same (the
  // dynamic symbols the addon binds to stay).
  await run("strip", ["-o", layer.host(NODE_PATH), nodeBinary]);
  layer.write("/etc/passwd", PASSWD);
  layer.write("/etc/group", GROUP);
  layer.mkdir("/tmp", 0o1777);
  layer.mkdir("/var/run");
  copyCopyrights(tree, layer, ["libc6", "libgcc-s1", "libstdc++6"]);
  return libs;
}

/** Stages the launcher's QEMU layer: the binary, the TCG module, their libraries not already in `baseLibs`, firmware. */
export async function stageQemu(tree: string, layer: LayerDir, baseLibs: readonly string[]): Promise<void> {
  const have = new Set(baseLibs);
  const libs = await elfClosure(tree, [QEMU_PATH, QEMU_TCG_MODULE]);
  for (const lib of libs) if (!have.has(lib)) copyFromTree(tree, layer, lib);
  copyFromTree(tree, layer, QEMU_PATH);
  copyFromTree(tree, layer, QEMU_TCG_MODULE);
  for (const fw of QEMU_FIRMWARE) copyFromTree(tree, layer, fw);
  copyCopyrights(tree, layer);
}

/**
 * The programs virt-handler plumbs launcher pods' networks with (@kvt/pod-network), and deletes conntrack entries in
 * the node's namespace with (--clear-migrated-flows), at Debian's paths.
 */
export const NET_TOOLS = [
  "/usr/bin/nsenter",
  "/bin/ip",
  "/sbin/bridge",
  "/usr/sbin/nft",
  "/usr/sbin/conntrack",
] as const;

/** The Debian packages of {@link NET_TOOLS} and of their libraries (whose copyright files the layer carries). */
const NET_TOOLS_PACKAGES = [
  "util-linux",
  "iproute2",
  "nftables",
  "libnftables1",
  "libnftnl11",
  "libmnl0",
  "libbpf1",
  "libelf1",
  "zlib1g",
  "libcap2",
  "libselinux1",
  "libpcre2-8-0",
  "libbsd0",
  "libmd0",
  "libtinfo6",
  "libgmp10",
  "libjansson4",
  "libxtables12",
  "libedit2",
  "conntrack",
  "libnetfilter-conntrack3",
  "libnfnetlink0",
];

/** Stages virt-handler's network tools layer: {@link NET_TOOLS}, their libraries not in `baseLibs`, copyrights. */
export async function stageNetTools(tree: string, layer: LayerDir, baseLibs: readonly string[]): Promise<void> {
  const have = new Set(baseLibs);
  const libs = await elfClosure(tree, [...NET_TOOLS]);
  for (const lib of libs) if (!have.has(lib)) copyFromTree(tree, layer, lib);
  for (const tool of NET_TOOLS) copyFromTree(tree, layer, tool);
  copyCopyrights(tree, layer, NET_TOOLS_PACKAGES);
}

/**
 * Stages an app layer: the bundle under {@link APP_ROOT}, and the addon where native/index.ts finds it, stripped
 * (17.5 MB with debug info, 0.75 MB without; Node binds to its dynamic symbols, which stay).
 */
export async function stageApp(layer: LayerDir, app: string, bundle: AppBundle, addon: string): Promise<void> {
  for (const name of readdirSync(bundle.dir)) layer.copy(join(bundle.dir, name), `${APP_ROOT}/bundle/${app}/${name}`);
  for (const asset of bundle.assets) layer.copy(asset.from, asset.to);
  if (!bundle.usesAddon) return;
  const path = `${APP_ROOT}/native/build/${basename(addon)}`;
  layer.mkdir(dirname(path));
  await run("strip", ["-o", layer.host(path), addon]);
}

/**
 * An executable at `path` (mode 0755) that runs the bundled ES module `entry` with its own arguments: how an image
 * answers a command a pod names instead of its entrypoint (`/usr/bin/virt-launcher-monitor --namespace ...`). The
 * file is a script for Node ({@link NODE_PATH}); `process.argv.slice(2)` is the command's arguments.
 */
export function stageCommand(layer: LayerDir, path: string, entry: string): void {
  layer.mkdir(dirname(path));
  layer.write(
    path,
    `#!${NODE_PATH}\n// ${basename(path)}: runs ${entry} with this command's arguments.\nimport(${JSON.stringify(entry)});\n`,
    0o755,
  );
}

/**
 * Stages a stored containerDisk image (tools/images' store entry in `dir`, its manifest `m`) as KubeVirt lays them
 * out: the disk under `/disk/`, the kernel and initrd for `kernelBoot` under `/boot/` (the VMI names them in
 * `kernelBoot.container.kernelPath`/`initrdPath`), all owned by KubeVirt's qemu user 107 (KubeVirt's
 * `ADD --chown=107:107`); and the store's manifest at `/image.json` with paths relative to the image root, which the
 * launcher reads from the image volume it is given (docs/decisions/0018-containerdisk-image-volumes.md). The
 * uncompressed kernel stays out (it only speeds the native VMM's boot; the bzImage boots on every backend).
 */
export function stageContainerDisk(layer: LayerDir, dir: string, m: ImageManifest): void {
  const manifest: Record<string, unknown> = { schemaVersion: 1, image: m.image, kernel: "boot/vmlinuz" };
  layer.copy(join(dir, m.kernel), "/boot/vmlinuz", 0o444);
  if (m.initrd) {
    layer.copy(join(dir, m.initrd), "/boot/initrd.img", 0o444);
    manifest.initrd = "boot/initrd.img";
  }
  if (m.disk) {
    layer.copy(join(dir, m.disk), `/disk/${basename(m.disk)}`, 0o440);
    manifest.disk = `disk/${basename(m.disk)}`;
  }
  manifest.cmdline = m.cmdline;
  manifest.pvmSafe = m.pvmSafe;
  for (const key of ["bootMarker", "minMemoryBytes", "sources"] as const)
    if (m[key] !== undefined) manifest[key] = m[key];
  layer.write("/image.json", `${JSON.stringify(manifest, null, 2)}\n`, 0o444);
  layer.chown("/image.json", 107, 107);
  for (const d of ["/boot", "/disk"]) if (existsSync(layer.host(d))) layer.chown(d, 107, 107);
}
