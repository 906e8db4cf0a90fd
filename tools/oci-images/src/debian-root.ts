/**
 * The Debian side of the images: one cached tree of unpacked Debian 12 packages (mmdebstrap's `extract` variant:
 * the packages and their dependencies unpacked, no maintainer scripts, no shell), from which the layers take only
 * the files each program needs: an ELF and its shared libraries, found by walking DT_NEEDED like the dynamic loader.
 * That keeps the images distroless: no shell, no apt, no dpkg, no coreutils.
 *
 * ```
 * <cache>/debian-<key>/     the unpacked packages (key = hash of suite, mirrors and package list)
 *   .complete               written last: its presence means the tree is whole
 * ```
 */
import { createHash } from "node:crypto";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { dirname, join, posix } from "node:path";
import { run } from "./host-tools.ts";

/** The Debian release the images are built from (the machines' own). */
export const DEBIAN_SUITE = "bookworm";

/** The archive, with its updates and security pockets, so the images carry current fixes. */
export const DEBIAN_SOURCES: readonly string[] = [
  `deb http://deb.debian.org/debian ${DEBIAN_SUITE} main`,
  `deb http://deb.debian.org/debian ${DEBIAN_SUITE}-updates main`,
  `deb http://deb.debian.org/debian-security ${DEBIAN_SUITE}-security main`,
];

/**
 * Packages unpacked into the tree: the C and C++ runtimes Node and the addon link to, QEMU for TCG, the tools
 * virt-handler plumbs launcher pods' networks with (nsenter from util-linux, ip from iproute2, nft from nftables),
 * and conntrack, with which it deletes the flows pinned to a migrated VMI's old pod address.
 */
export const DEBIAN_PACKAGES: readonly string[] = [
  "libc6",
  "libgcc-s1",
  "libstdc++6",
  "qemu-system-x86",
  "util-linux",
  "iproute2",
  "nftables",
  "conntrack",
];

/** The dynamic loader every x86-64 glibc program names as its interpreter. */
export const LOADER = "/lib64/ld-linux-x86-64.so.2";

const LIBRARY_DIRS = ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/lib", "/usr/lib"];

/**
 * The unpacked Debian tree under `cacheDir`, made with mmdebstrap when missing (about a minute, mostly download).
 * `refresh` makes it again (new security fixes).
 */
export async function debianRoot(cacheDir: string, log: (line: string) => void, refresh = false): Promise<string> {
  const key = createHash("sha256")
    .update(JSON.stringify([DEBIAN_SUITE, DEBIAN_SOURCES, DEBIAN_PACKAGES]))
    .digest("hex")
    .slice(0, 16);
  const dir = join(cacheDir, `debian-${key}`);
  if (refresh) rmSync(dir, { recursive: true, force: true });
  if (existsSync(join(dir, ".complete"))) return dir;
  log(`unpacking Debian ${DEBIAN_SUITE} packages (${DEBIAN_PACKAGES.join(", ")} and dependencies) with mmdebstrap`);
  const tmp = `${dir}.tmp`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(cacheDir, { recursive: true });
  await run("mmdebstrap", [
    "--variant=extract",
    "--quiet",
    `--include=${DEBIAN_PACKAGES.join(",")}`,
    DEBIAN_SUITE,
    tmp,
    ...DEBIAN_SOURCES,
  ]);
  writeFileSync(join(tmp, ".complete"), `${new Date().toISOString()}\n`);
  rmSync(dir, { recursive: true, force: true });
  renameSync(tmp, dir);
  return dir;
}

/**
 * Resolves `path` (absolute, inside the tree at `root`) the way the kernel would inside a chroot: every symbolic
 * link, absolute ones included, is followed relative to `root`. Returns the resolved path inside the tree, or
 * undefined when it does not exist.
 */
export function resolveInRoot(root: string, path: string): string | undefined {
  const todo = path.split("/").filter(Boolean);
  let current = "/";
  for (let hops = 0; todo.length > 0; ) {
    const part = todo.shift() as string;
    if (part === ".") continue;
    if (part === "..") {
      current = posix.dirname(current);
      continue;
    }
    const next = posix.join(current, part);
    const host = join(root, next);
    if (!existsSync(host) && !isSymlink(host)) return undefined;
    if (!isSymlink(host)) {
      current = next;
      continue;
    }
    if (++hops > 40) return undefined;
    const target = readlinkSync(host);
    todo.unshift(...target.split("/").filter(Boolean));
    if (target.startsWith("/")) current = "/";
  }
  return current;
}

function isSymlink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false; // missing: the caller's existsSync decides
  }
}

interface DynamicInfo {
  readonly needed: string[];
  readonly runpath: string[];
}

/**
 * readelf's answers for files of a tree, kept in the tree (`.elf-needed.json`): the tree never changes once
 * complete, and asking readelf about QEMU's ~100 libraries costs seconds on every warm build.
 */
function treeInfoCache(root: string): Map<string, DynamicInfo> {
  const file = join(root, ".elf-needed.json");
  if (!existsSync(file)) return new Map();
  return new Map(Object.entries(JSON.parse(readFileSync(file, "utf8")) as Record<string, DynamicInfo>));
}

async function dynamicInfo(file: string): Promise<DynamicInfo> {
  const out = await run("readelf", ["-d", "-W", file]);
  const needed = [...out.matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1]);
  const runpath = [...out.matchAll(/\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[([^\]]+)\]/g)].flatMap((m) =>
    m[1].split(":"),
  );
  return { needed, runpath };
}

/**
 * The shared libraries that `files` (paths inside the tree at `root`) and `hostFiles` (ELF files on this machine,
 * such as the project's Node binary and addon) load, transitively, all found in the tree, as paths inside it (as
 * the loader names them, before symlinks), plus the loader itself. Throws when a library is missing.
 */
export async function elfClosure(
  root: string,
  files: readonly string[],
  hostFiles: readonly string[] = [],
): Promise<string[]> {
  const found = new Set<string>([LOADER]);
  const seen = new Set<string>();
  const cache = treeInfoCache(root);
  let cacheChanged = false;
  const queue: { path: string; onHost: boolean }[] = [
    ...hostFiles.map((path) => ({ path, onHost: true })),
    ...files.map((path) => ({ path, onHost: false })),
  ];
  while (queue.length > 0) {
    const { path: file, onHost } = queue.shift() as { path: string; onHost: boolean };
    if (seen.has(file)) continue;
    seen.add(file);
    const real = onHost ? file : resolveInRoot(root, file);
    if (!real) throw new Error(`Cannot find ${file} in the Debian tree ${root}`);
    let info = onHost ? undefined : cache.get(real);
    if (!info) {
      info = await dynamicInfo(onHost ? real : join(root, real));
      if (!onHost) {
        cache.set(real, info);
        cacheChanged = true;
      }
    }
    const origin = onHost ? [] : info.runpath.map((p) => p.replace("$ORIGIN", dirname(file)));
    for (const lib of info.needed) {
      const path = [...origin, ...LIBRARY_DIRS]
        .map((d) => posix.join(d, lib))
        .find((p) => resolveInRoot(root, p) !== undefined);
      if (!path) throw new Error(`Cannot find ${lib} (needed by ${file}) in the Debian tree ${root}`);
      if (!found.has(path)) {
        found.add(path);
        queue.push({ path, onHost: false });
      }
    }
  }
  if (cacheChanged) writeFileSync(join(root, ".elf-needed.json"), JSON.stringify(Object.fromEntries(cache)));
  return [...found].sort();
}
