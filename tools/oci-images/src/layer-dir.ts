/**
 * A layer's file tree, assembled in a staging directory before umoci turns it into a tar layer. Every path is given
 * as it appears in the image (`/usr/local/bin/node`). Files are copied dereferenced (a layer holds no links into
 * the build machine), and `seal()` gives every entry one fixed modification time, so the same inputs make the same
 * layer digest, and returns the tree's digest (what the build cache compares) and its size.
 */
import { createHash } from "node:crypto";
import {
  chmodSync,
  chownSync,
  copyFileSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { dirname, join } from "node:path";

/** The modification time of every file in every layer (2026-01-01T00:00:00Z): reproducible layers. */
export const LAYER_MTIME = new Date("2026-01-01T00:00:00Z");

/** Digest and size of a sealed layer tree. */
export interface LayerDigest {
  /** sha256 over every entry's path, type, mode, owner, link target and content. */
  readonly digest: string;
  /** Bytes of file content (the layer's uncompressed size, give or take tar headers). */
  readonly bytes: number;
}

/** One layer's staging directory. */
export class LayerDir {
  readonly dir: string;

  /** Starts an empty tree at `dir` (whatever was there is removed). */
  constructor(dir: string) {
    this.dir = dir;
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
  }

  /** Host path of image path `path`. */
  host(path: string): string {
    return join(this.dir, path);
  }

  /** Creates directory `path` (and its parents, 0755) with `mode`. */
  mkdir(path: string, mode = 0o755): void {
    mkdirSync(this.host(path), { recursive: true, mode: 0o755 });
    chmodSync(this.host(path), mode);
  }

  /** Copies host file `source` (symlinks followed) to image path `path`; mode from the source unless given. */
  copy(source: string, path: string, mode?: number): void {
    this.mkdir(dirname(path));
    copyFileSync(source, this.host(path));
    chmodSync(this.host(path), mode ?? lstatSync(source).mode & 0o7777);
  }

  /** Writes `content` to image path `path`. */
  write(path: string, content: string | Uint8Array, mode = 0o644): void {
    this.mkdir(dirname(path));
    writeFileSync(this.host(path), content);
    chmodSync(this.host(path), mode);
  }

  /** Gives image path `path` (and everything under it) to `uid`:`gid`. */
  chown(path: string, uid: number, gid: number): void {
    const walk = (host: string): void => {
      chownSync(host, uid, gid);
      if (lstatSync(host).isDirectory()) for (const e of readdirSync(host)) walk(join(host, e));
    };
    walk(this.host(path));
  }

  /** Fixes every modification time and returns the tree's digest; call once, after the last change. */
  seal(): LayerDigest {
    const hash = createHash("sha256");
    let bytes = 0;
    const walk = (rel: string): void => {
      const host = join(this.dir, rel);
      const st = lstatSync(host);
      const kind = st.isDirectory() ? "d" : st.isSymbolicLink() ? "l" : "f";
      hash.update(`${kind} ${rel} ${(st.mode & 0o7777).toString(8)} ${st.uid}:${st.gid}\n`);
      if (kind === "l") hash.update(`-> ${readlinkSync(host)}\n`);
      if (kind === "f") {
        hash.update(readFileSync(host));
        bytes += st.size;
      }
      if (kind === "d") for (const e of readdirSync(host).sort()) walk(join(rel, e));
      if (kind !== "l") utimesSync(host, LAYER_MTIME, LAYER_MTIME);
    };
    walk("/");
    return { digest: `sha256:${hash.digest("hex")}`, bytes };
  }
}
