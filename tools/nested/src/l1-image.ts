/**
 * The L1 host of the nested lane, built from Debian packages only and cached under `.data/nested`:
 *
 *   demo image manifest (.data/images/local/demo-linux) --> its kernel package (linux-image-6.1.0-NN-amd64)
 *   apt-get download kernel + busybox-static --> dpkg -x --> l1.cpio: busybox, /init (guest/l1-init.sh),
 *   /mods: the 9p-over-virtio chain and kvm-amd with their dependencies, in load order (/mods/order)
 *
 * The L1 kernel is the demo image's kernel, so one download serves both levels. The initramfs records a SHA-256 of
 * its inputs and is rebuilt only when they change. Nothing else is put into the
 * initramfs: node, the addon and the images are read from the build host through 9p (see l1-init.sh).
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import {
  buildDemoLinux,
  type CpioEntry,
  DEMO_LINUX_IMAGE,
  defaultStoreRoot,
  imageDir,
  machineCache,
  machineCacheKey,
  writeCpio,
} from "@kvt/images";

const run = promisify(execFile);

/** The project root (the directory the L1 host sees at the same path through 9p). */
export const projectRoot: string = new URL("../../../", import.meta.url).pathname.replace(/\/$/, "");
/** Where the lane caches packages and the L1 initramfs. */
export const nestedDataDir: string = join(projectRoot, ".data", "nested");

/**
 * Modules the L1 init loads (dependencies first are added), with their options: tun and bridge for the net group,
 * loop for the block group;
 * veth and nftables' NAT, conntrack and reject for the network bench's pod network, masquerade binding and Service
 * rules (L1 has no modprobe the kernel could call to load them on demand).
 */
const L1_MODULES: readonly [string, string][] = [
  ["virtio_pci", ""],
  ["9pnet_virtio", ""],
  ["9p", ""],
  ["kvm-amd", "npt=1 nested=1"],
  ["tun", ""],
  ["bridge", ""],
  // loop for the block group's Block claim (a loop device over a file in L1's /tmp).
  ["loop", ""],
  ["veth", ""],
  // libcrc32c (nf_nat's) asks the crypto API for crc32c when it loads: a soft dependency modinfo's depends omits.
  ["crc32c_generic", ""],
  ["nft_chain_nat", ""],
  ["nft_nat", ""],
  ["nft_masq", ""],
  ["nft_ct", ""],
  ["nft_reject_ipv4", ""],
  ["nft_numgen", ""],
  ["nf_conntrack_netlink", ""],
  // /dev/vhost-net: the in-kernel virtio-net data path both VMMs take where it exists (native vhost_net.h).
  ["vhost_net", ""],
];

/** Bump when the initramfs layout changes in a way l1-init.sh does not show. */
const BUILD_REVISION = "kvt-nested-l1 2";

/** The built L1 host: kernel and initramfs paths. */
export interface L1Image {
  readonly kernelPath: string;
  readonly initrdPath: string;
  readonly kernelVersion: string;
}

async function debianPackage(name: string, version: string | undefined, log: (l: string) => void): Promise<string> {
  const spec = version ? `${name}=${version}` : name;
  const dir = join(nestedDataDir, "debs", spec.replaceAll(":", "%3a"));
  const dest = join(dir, "root");
  if (existsSync(join(dir, "done"))) return dest;
  log(`nested: apt-get download ${spec}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  await run("apt-get", ["download", spec], { cwd: dir, maxBuffer: 16 << 20 });
  const deb = readdirSync(dir).find((f) => f.endsWith(".deb"));
  if (!deb) throw new Error(`apt-get download ${spec} produced no .deb`);
  await run("dpkg", ["-x", join(dir, deb), dest], { maxBuffer: 16 << 20 });
  rmSync(join(dir, deb));
  writeFileSync(join(dir, "done"), "");
  return dest;
}

/** Module file paths by canonical name (dashes as underscores), under lib/modules/<version>/kernel. */
function indexModules(modulesDir: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith(".ko")) out.set(e.name.slice(0, -3).replaceAll("-", "_"), p);
    }
  };
  walk(modulesDir);
  return out;
}

/** The `depends=` list of a module. */
function dependsOf(ko: Uint8Array): string[] {
  const text = Buffer.from(ko).toString("latin1");
  const m = /\0depends=([^\0]*)\0/.exec(text);
  return m?.[1] ? m[1].split(",").filter(Boolean) : [];
}

/** Modules in load order (dependencies first), each with its options. */
export function moduleLoadOrder(
  wanted: readonly [string, string][],
  index: ReadonlyMap<string, string>,
  read: (path: string) => Uint8Array,
): [string, string][] {
  const order: [string, string][] = [];
  const seen = new Set<string>();
  const visit = (name: string, opts: string): void => {
    const key = name.replaceAll("-", "_");
    if (seen.has(key)) return;
    seen.add(key);
    const path = index.get(key);
    if (!path) throw new Error(`module ${name} is not in the kernel package`);
    for (const dep of dependsOf(read(path))) visit(dep, "");
    order.push([key, opts]);
  };
  for (const [name, opts] of wanted) visit(name, opts);
  return order;
}

/** Builds (or reuses) the L1 kernel and initramfs. */
export async function buildL1Image(log: (line: string) => void = () => {}): Promise<L1Image> {
  const store = defaultStoreRoot();
  const demoDir = imageDir(store, DEMO_LINUX_IMAGE);
  // Built, or rebuilt when its inputs changed (a new module, a new kernel); skipped when current.
  const demo = await buildDemoLinux({ storeRoot: store, log });
  if (!demo.skipped) log("nested: rebuilt the demo image");
  const manifest = JSON.parse(readFileSync(join(demoDir, "image.json"), "utf8")) as {
    sources?: { name: string; version: string }[];
  };
  const kernelPkg = manifest.sources?.find((s) => s.name.startsWith("linux-image-"));
  if (!kernelPkg) throw new Error("the demo image manifest names no kernel package");
  const kernelVersion = kernelPkg.name.replace(/^linux-image-/, "");
  const initrdName = `l1-${kernelVersion}.cpio`;
  const initrdPath = join(nestedDataDir, initrdName);
  // The demo image's bzImage is that package's /boot/vmlinuz, copied: L1 boots it, so the package is unpacked only
  // when the initramfs needs its modules.
  const kernelPath = join(demoDir, "vmlinuz");
  const initSource = new URL("./guest/l1-init.sh", import.meta.url);
  // Everything the initramfs is made of, hashed: a change to any of them (the init script, the module list, the
  // kernel package) rebuilds it; otherwise the cached one is used as it is.
  const inputs = [BUILD_REVISION, readFileSync(initSource, "utf8"), JSON.stringify(L1_MODULES), kernelPkg.version];
  const layout = `${BUILD_REVISION} inputs ${createHash("sha256").update(inputs.join("\0")).digest("hex")}`;
  // The initramfs's busybox, and the one the net checks run their ping with (net-checks.ts): unpacked either way.
  const bbroot = await debianPackage("busybox-static", undefined, log);
  const current = (): boolean => existsSync(initrdPath) && readFileSync(initrdPath).includes(Buffer.from(layout));
  // A fresh clone (each CI run) takes the initramfs another clone built from the same inputs and code.
  const cache = machineCache("nested-l1", { log });
  const cacheKey = machineCacheKey([layout, initrdName], [new URL(import.meta.url).pathname]);
  if (current() || (cache.restore(cacheKey, nestedDataDir) && current())) {
    cache.save(cacheKey, nestedDataDir, (rel) => rel === initrdName);
    return { kernelPath, initrdPath, kernelVersion };
  }
  const kroot = await debianPackage(kernelPkg.name, kernelPkg.version, log);
  const index = indexModules(join(kroot, "lib", "modules", kernelVersion, "kernel"));
  const order = moduleLoadOrder(L1_MODULES, index, (p) => readFileSync(p));
  const entries: CpioEntry[] = [
    { kind: "dir", path: "bin" },
    { kind: "file", path: "bin/busybox", data: readFileSync(join(bbroot, "bin", "busybox")), mode: 0o755 },
    { kind: "symlink", path: "bin/sh", target: "busybox" },
    { kind: "dir", path: "dev" },
    { kind: "chardev", path: "dev/console", major: 5, minor: 1, mode: 0o600 },
    { kind: "file", path: "init", data: readFileSync(initSource), mode: 0o755 },
    { kind: "file", path: "layout", data: Buffer.from(layout) },
    { kind: "dir", path: "mods" },
    ...order.map(
      ([name]): CpioEntry => ({ kind: "file", path: `mods/${name}.ko`, data: readFileSync(index.get(name) ?? "") }),
    ),
    {
      kind: "file",
      path: "mods/order",
      data: Buffer.from(order.map(([n, o]) => `${n}.ko ${o}`.trim()).join("\n") + "\n"),
    },
  ];
  writeFileSync(`${initrdPath}.tmp`, writeCpio(entries));
  renameSync(`${initrdPath}.tmp`, initrdPath);
  log(`nested: built ${initrdPath} (${order.map(([n]) => n).join(" ")})`);
  cache.save(cacheKey, nestedDataDir, (rel) => rel === initrdName);
  return { kernelPath, initrdPath, kernelVersion };
}
