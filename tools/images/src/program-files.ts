/**
 * Dynamically linked programs for the demo image, from unpacked Debian packages: each program and the shared
 * libraries it loads, found by following DT_NEEDED (elf-deps.ts) through the packages. Everything else in the image
 * is static busybox.
 *
 *   packages -> unpack (dpkg -x, one directory each) -> programs -> DT_NEEDED closure (ld.so, libc, ...)
 *            -> image files: each program at its image path, /lib/x86_64-linux-gnu/<soname>,
 *               /lib64/ld-linux-x86-64.so.2 -> the loader
 */
import { existsSync, lstatSync, readFileSync, readlinkSync } from "node:fs";
import { dirname, join, posix } from "node:path";
import { elfDependencies } from "./elf-deps.ts";

/** Where the image keeps the libraries: Debian's multiarch directory, one of glibc's built-in search paths. */
export const IMAGE_LIB_DIR = "lib/x86_64-linux-gnu";
const SEARCH_DIRS = ["lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib64", "lib", "usr/lib"];

/** A program of the image: [path in its package, path in the image]. */
export type ImageProgram = readonly [string, string];

/** A library or program the closure could not find; `message` names it and who needs it. */
export class ProgramFilesError extends Error {
  override name = "ProgramFilesError";
}

/** The programs' files: regular files by image path, and symlinks (path -> target). */
export interface ProgramFiles {
  readonly files: ReadonlyMap<string, Uint8Array>;
  readonly symlinks: ReadonlyMap<string, string>;
}

/** The real file behind `path` inside an unpacked package `root` (symlinks followed within the root). */
function realFile(root: string, rel: string): string | undefined {
  let current = rel;
  for (let hops = 0; hops < 16; hops++) {
    const full = join(root, current);
    if (!existsSync(full)) return undefined;
    if (!lstatSync(full).isSymbolicLink()) return full;
    const target = readlinkSync(full);
    current = target.startsWith("/") ? target.slice(1) : posix.join(dirname(current), target);
  }
  return undefined;
}

function findIn(roots: readonly string[], candidates: readonly string[]): string | undefined {
  for (const root of roots) {
    for (const rel of candidates) {
      const found = realFile(root, rel);
      if (found) return found;
    }
  }
  return undefined;
}

/**
 * Collects `programs` and their library closure from the unpacked packages under `roots` (one directory per
 * package, `dpkg -x` layout). Throws ProgramFilesError naming what is missing.
 */
export function programFiles(roots: readonly string[], programs: readonly ImageProgram[]): ProgramFiles {
  const files = new Map<string, Uint8Array>();
  const symlinks = new Map<string, string>();
  const pending: { data: Buffer; who: string }[] = [];
  for (const [from, to] of programs) {
    const found = findIn(roots, [from]);
    if (!found) throw new ProgramFilesError(`${from} is in none of the packages at ${roots.join(", ")}`);
    const data = readFileSync(found);
    files.set(to, data);
    pending.push({ data, who: to });
  }
  const seen = new Set<string>();
  while (pending.length > 0) {
    const { data, who } = pending.shift() as { data: Buffer; who: string };
    const deps = elfDependencies(data);
    const names = [...deps.needed];
    if (deps.interpreter) {
      const loader = posix.basename(deps.interpreter);
      names.push(loader);
      // The path programs ask for (/lib64/ld-linux-x86-64.so.2) leads to the loader kept with the libraries.
      symlinks.set(
        deps.interpreter.slice(1),
        posix.relative(posix.dirname(deps.interpreter), `/${IMAGE_LIB_DIR}/${loader}`),
      );
    }
    for (const name of names) {
      if (seen.has(name)) continue;
      seen.add(name);
      const found = findIn(
        roots,
        SEARCH_DIRS.map((d) => `${d}/${name}`),
      );
      if (!found) throw new ProgramFilesError(`${name}, needed by ${who}, is in none of the packages`);
      const lib = readFileSync(found);
      files.set(`${IMAGE_LIB_DIR}/${name}`, lib);
      pending.push({ data: lib, who: name });
    }
  }
  return { files, symlinks };
}
