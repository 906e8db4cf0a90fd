/**
 * The machine's cache of deterministic build outputs: directories of files, each stored under a key that digests
 * everything that made it (pinned versions, the builder's own sources), so an entry is only ever reused for exactly
 * the build that made it. CI clones the project afresh each run and its git-ignored build folders start empty; the
 * compilers' own caches (Go's GOCACHE, ccache) live on the machine, and this does the same for what they do not
 * cover: the Kubernetes binaries tools/kube links, and the guest images tools/images assembles from Debian packages.
 *
 *   <root>/<kind>/<key>/            one entry: the files, written under a temporary name and renamed when complete
 *   <root>  = $KVT_MACHINE_CACHE, else $XDG_CACHE_HOME/kubevirt-ts, else ~/.cache/kubevirt-ts
 *   KVT_MACHINE_CACHE=off           no cache: every restore misses and nothing is saved
 *
 *   restore(key, dir) --no entry--> false (the caller builds, then save(key, dir))
 *        | copies the entry's files into dir (the entry's mtime marks it used)
 *        v
 *   true
 *
 * Each kind keeps its `keep` most recently used entries (default 2: the pinned build and the one before it).
 * A failure to save only costs the next clone a build: it is reported to `log`, never thrown.
 */
import { createHash, randomBytes } from "node:crypto";
import {
  copyFileSync,
  existsSync,
  linkSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  utimesSync,
} from "node:fs";
import { homedir } from "node:os";
import { basename, join } from "node:path";

/** One kind of build output in the machine's cache. */
export interface MachineCache {
  /** The entry's directory, whether or not it exists (for messages). */
  readonly pathOf: (key: string) => string;
  /** Copies the entry `key` into `dir` (made if missing); false when there is none (or the cache is off). */
  readonly restore: (key: string, dir: string) => boolean;
  /** Stores `dir`'s files (recursively) as the entry `key`, unless it exists; drops the least recently used extras. */
  readonly save: (key: string, dir: string, filter?: (relPath: string) => boolean) => void;
}

export interface MachineCacheOptions {
  /** The cache root (default: from the environment, see above). */
  readonly root?: string;
  /** How many entries of this kind to keep (default 2). */
  readonly keep?: number;
  /** Told when an entry is restored or saved, and why a save failed. */
  readonly log?: (line: string) => void;
}

/** The cache root from the environment, or undefined when KVT_MACHINE_CACHE=off. */
export function machineCacheRoot(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const set = env.KVT_MACHINE_CACHE;
  if (set === "off") return undefined;
  if (set) return set;
  return join(env.XDG_CACHE_HOME || join(homedir(), ".cache"), "kubevirt-ts");
}

/**
 * A cache key: a digest of `parts` (versions, flags) and of the contents of `files` (the builder's own sources, so a
 * change to how something is built never reuses what the old code built).
 */
export function machineCacheKey(parts: readonly string[], files: readonly string[] = []): string {
  const h = createHash("sha256");
  for (const part of parts) h.update(`${part.length}:${part}`);
  for (const file of files) {
    const data = readFileSync(file);
    h.update(`${basename(file)}:${data.length}:`).update(data);
  }
  return h.digest("hex").slice(0, 32);
}

/** The machine cache of build outputs of `kind` (a directory name, e.g. `kube-bin`). */
export function machineCache(kind: string, options: MachineCacheOptions = {}): MachineCache {
  if (!/^[a-z0-9][a-z0-9._-]*$/.test(kind)) throw new Error(`invalid machine cache kind "${kind}"`);
  const root = options.root ?? machineCacheRoot();
  const keep = options.keep ?? 2;
  const log = options.log ?? ((): void => {});
  const base = root === undefined ? undefined : join(root, kind);
  const checkKey = (key: string): void => {
    if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(key)) throw new Error(`invalid machine cache key "${key}"`);
  };
  return {
    pathOf: (key) => join(base ?? "(machine cache off)", key),
    restore(key, dir) {
      checkKey(key);
      if (base === undefined) return false;
      const entry = join(base, key);
      if (!existsSync(entry)) return false;
      copyTree(entry, dir, () => true);
      const now = new Date();
      utimesSync(entry, now, now);
      log(`restored from the machine cache: ${entry}`);
      return true;
    },
    save(key, dir, filter = () => true) {
      checkKey(key);
      if (base === undefined) return;
      const entry = join(base, key);
      if (existsSync(entry)) return;
      const tmp = join(base, `.tmp-${process.pid}-${randomBytes(4).toString("hex")}`);
      try {
        copyTree(dir, tmp, filter);
        renameSync(tmp, entry);
        log(`saved to the machine cache: ${entry}`);
      } catch (err) {
        rmSync(tmp, { recursive: true, force: true });
        // Another process saving the same key at the same time got there first: its entry is as good.
        if (!existsSync(entry)) log(`not saved to the machine cache (${entry}): ${(err as Error).message}`);
        return;
      }
      prune(base, keep);
    },
  };
}

/**
 * Puts the regular files and directories under `from` into `to`; `filter` sees paths relative to `from`. Files are
 * hard links where both are on one filesystem (instant, no space, sparse disk images stay sparse), else copies. The
 * builders that fill a cache never write a file in place (they write a new one and rename it over the old), so a
 * later build in one tree does not change the other.
 */
function copyTree(from: string, to: string, filter: (relPath: string) => boolean, rel = ""): void {
  mkdirSync(to, { recursive: true });
  for (const e of readdirSync(from, { withFileTypes: true })) {
    const relPath = rel ? `${rel}/${e.name}` : e.name;
    if (!filter(relPath)) continue;
    const src = join(from, e.name);
    const dst = join(to, e.name);
    if (e.isDirectory()) copyTree(src, dst, filter, relPath);
    else if (e.isFile()) {
      rmSync(dst, { force: true });
      try {
        linkSync(src, dst);
      } catch {
        copyFileSync(src, dst); // another filesystem (or links refused): the mode comes along
      }
    }
  }
}

/** A temporary entry this old was left by a save that died. */
const STALE_TMP_MS = 24 * 3600_000;

/** Keeps the `keep` most recently used entries under `base`, and drops temporary ones a dead save left. */
function prune(base: string, keep: number): void {
  const all = readdirSync(base).map((name) => ({ name, used: statSync(join(base, name)).mtimeMs }));
  const entries = all.filter((e) => !e.name.startsWith(".tmp-")).sort((a, b) => b.used - a.used);
  const stale = all.filter((e) => e.name.startsWith(".tmp-") && Date.now() - e.used > STALE_TMP_MS);
  for (const old of [...entries.slice(keep), ...stale]) rmSync(join(base, old.name), { recursive: true, force: true });
}
