/**
 * Test support only (the launcher never imports it): independent readers of the ISO images we write, from Debian's
 * packages - the kernel's isofs through `mount -o loop,ro` (or, when this kernel has no iso9660, FUSE's fuseiso),
 * genisoimage's `isoinfo`, `xorriso` and libarchive's `bsdtar`. Missing tools are installed by @kvt/runtime's
 * ensureHostTools (apt-get when running as root, as CI does).
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureHostTools, type HostTool, onPath } from "@kvt/runtime";

/** The readers, by the Debian package of each. */
const ISO_READERS: readonly HostTool[] = [
  { bin: "isoinfo", pkg: "genisoimage" },
  { bin: "xorriso", pkg: "xorriso" },
  { bin: "bsdtar", pkg: "libarchive-tools" },
  { bin: "blkid", pkg: "util-linux" },
];

/** FUSE's ISO reader: only stands in for a kernel without iso9660 (readMounted). */
const FUSEISO: readonly HostTool[] = [{ bin: "fuseiso", pkg: "fuseiso" }];

/**
 * Makes sure the readers exist, installing them with apt-get when root; rejects with a HostToolError naming the
 * command when one is still missing. fuseiso is optional: readMounted says why when it is needed and absent.
 */
export async function ensureIsoTools(): Promise<void> {
  await ensureHostTools(ISO_READERS);
  // Not fatal: fuseiso is needed only where the kernel has no iso9660, and readMounted reports its absence there.
  await ensureHostTools(FUSEISO).catch(() => undefined);
}

/** Runs a tool and returns stdout; throws with stderr when it fails. */
export function runTool(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { encoding: "utf8", maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")} failed (${r.status}): ${r.stderr}`);
  return r.stdout;
}

/** A scratch directory holding `image.iso`; remove it with cleanup(). */
export function writeScratchImage(image: Buffer): { file: string; dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), "kvt-iso-"));
  const file = join(dir, "image.iso");
  writeFileSync(file, image);
  return { file, dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** One file as a mounted filesystem shows it. */
export interface MountedFile {
  readonly mode: number;
  readonly content: Buffer;
}

/** A mounted image: every regular file by path, and how it was mounted. */
export interface MountedTree {
  readonly how: "kernel isofs" | "fuseiso";
  readonly files: Map<string, MountedFile>;
  readonly directories: Set<string>;
}

function walk(root: string, rel: string, out: MountedTree): void {
  for (const name of readdirSync(join(root, rel))) {
    const path = rel ? `${rel}/${name}` : name;
    const st = statSync(join(root, path));
    if (st.isDirectory()) {
      out.directories.add(path);
      walk(root, path, out);
    } else out.files.set(path, { mode: st.mode, content: readFileSync(join(root, path)) });
  }
}

/**
 * Mounts `file` read-only and reads every file back: through the kernel's isofs when it can (what a guest's Linux
 * does), else through fuseiso. Returns a string saying why when neither is permitted here.
 */
export function readMounted(file: string, scratch: string): MountedTree | string {
  const mnt = join(scratch, "mnt");
  mkdirSync(mnt, { recursive: true });
  const kernel = spawnSync("mount", ["-o", "loop,ro", "-t", "iso9660", file, mnt], { encoding: "utf8" });
  const how = kernel.status === 0 ? "kernel isofs" : "fuseiso";
  if (kernel.status !== 0) {
    const fuse = onPath("fuseiso") ? spawnSync("fuseiso", [file, mnt], { encoding: "utf8" }) : undefined;
    if (fuse?.status !== 0) {
      return `mount -o loop,ro: ${kernel.stderr.trim() || kernel.status}; fuseiso: ${fuse ? fuse.stderr.trim() : "not installed"}`;
    }
  }
  try {
    const tree: MountedTree = { how, files: new Map(), directories: new Set() };
    walk(mnt, "", tree);
    return tree;
  } finally {
    spawnSync(how === "fuseiso" ? "fusermount" : "umount", how === "fuseiso" ? ["-u", mnt] : [mnt]);
  }
}

/**
 * `isoinfo -f` with Rock Ridge (-R) or Joliet (-J) names: every path, without the leading "/". isoinfo prints
 * Rock Ridge names as their bytes (UTF-8 here) and Joliet names in ISO 8859-1, `_` for what that lacks.
 */
export function isoinfoPaths(file: string, flavour: "-R" | "-J"): string[] {
  const r = spawnSync("isoinfo", [flavour, "-f", "-i", file], { maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`isoinfo ${flavour} -f failed: ${String(r.stderr)}`);
  return r.stdout
    .toString(flavour === "-J" ? "latin1" : "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => l.replace(/^\//, ""));
}

/** One file's bytes through isoinfo's Rock Ridge view. */
export function isoinfoExtract(file: string, path: string): Buffer {
  const r = spawnSync("isoinfo", ["-R", "-i", file, "-x", `/${path}`], { maxBuffer: 256 << 20 });
  if (r.status !== 0) throw new Error(`isoinfo -x /${path} failed: ${String(r.stderr)}`);
  return r.stdout;
}
