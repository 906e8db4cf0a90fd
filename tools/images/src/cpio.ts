/**
 * A writer for the cpio "newc" archive format the Linux kernel unpacks as its initramfs
 * (Documentation/driver-api/early-userspace/buffer-format.rst). Pure: entries in, bytes out.
 *
 *   entry := header(110 ASCII bytes: "070701" + 13 x 8 hex digits) name NUL pad4 data pad4
 *   archive := entry* entry("TRAILER!!!")
 *
 * Writing it ourselves means the image needs no `cpio` tool and can hold device nodes (/dev/console) without root.
 */

/** One file, directory, symlink or character device in the archive. Paths are relative, without a leading `/`. */
export type CpioEntry =
  | { readonly kind: "dir"; readonly path: string; readonly mode?: number }
  | { readonly kind: "file"; readonly path: string; readonly data: Uint8Array; readonly mode?: number }
  | { readonly kind: "symlink"; readonly path: string; readonly target: string }
  | {
      readonly kind: "chardev";
      readonly path: string;
      readonly major: number;
      readonly minor: number;
      readonly mode?: number;
    };

const S_IFDIR = 0o040000;
const S_IFREG = 0o100000;
const S_IFLNK = 0o120000;
const S_IFCHR = 0o020000;

function hex8(n: number): string {
  return n.toString(16).padStart(8, "0");
}

function pad4(n: number): number {
  return (4 - (n % 4)) % 4;
}

function header(fields: {
  ino: number;
  mode: number;
  nlink: number;
  mtime: number;
  size: number;
  rmaj: number;
  rmin: number;
  nameSize: number;
}): string {
  const f = fields;
  return `070701${[f.ino, f.mode, 0, 0, f.nlink, f.mtime, f.size, 0, 0, f.rmaj, f.rmin, f.nameSize, 0].map(hex8).join("")}`;
}

/** Serializes `entries` in order (parents must come before their children) with a fixed `mtime` (seconds). */
export function writeCpio(entries: readonly CpioEntry[], mtime = 0): Uint8Array {
  const chunks: Uint8Array[] = [];
  let total = 0;
  const push = (b: Uint8Array): void => {
    chunks.push(b);
    total += b.length;
  };
  const enc = new TextEncoder();
  const emit = (ino: number, name: string, mode: number, nlink: number, data: Uint8Array, rmaj = 0, rmin = 0): void => {
    const nameBytes = enc.encode(`${name}\0`);
    const head = enc.encode(
      header({ ino, mode, nlink, mtime, size: data.length, rmaj, rmin, nameSize: nameBytes.length }),
    );
    push(head);
    push(nameBytes);
    push(new Uint8Array(pad4(head.length + nameBytes.length)));
    push(data);
    push(new Uint8Array(pad4(data.length)));
  };
  let ino = 1;
  for (const e of entries) {
    if (e.path.startsWith("/") || e.path === "")
      throw new Error(`cpio: path must be relative and non-empty: "${e.path}"`);
    switch (e.kind) {
      case "dir":
        emit(ino++, e.path, S_IFDIR | (e.mode ?? 0o755), 2, new Uint8Array(0));
        break;
      case "file":
        emit(ino++, e.path, S_IFREG | (e.mode ?? 0o644), 1, e.data);
        break;
      case "symlink":
        emit(ino++, e.path, S_IFLNK | 0o777, 1, enc.encode(e.target));
        break;
      case "chardev":
        emit(ino++, e.path, S_IFCHR | (e.mode ?? 0o600), 1, new Uint8Array(0), e.major, e.minor);
        break;
    }
  }
  emit(0, "TRAILER!!!", 0, 1, new Uint8Array(0));
  const out = new Uint8Array(total);
  let off = 0;
  for (const c of chunks) {
    out.set(c, off);
    off += c.length;
  }
  return out;
}

/** Parses a newc archive back into names and sizes (used by tests to check an image's contents). */
export function listCpio(archive: Uint8Array): { path: string; mode: number; size: number; data: Uint8Array }[] {
  const dec = new TextDecoder();
  const out: { path: string; mode: number; size: number; data: Uint8Array }[] = [];
  let off = 0;
  while (off + 110 <= archive.length) {
    const head = dec.decode(archive.subarray(off, off + 110));
    if (!head.startsWith("070701")) throw new Error(`cpio: bad magic at offset ${off}`);
    const field = (i: number): number => Number.parseInt(head.slice(6 + i * 8, 14 + i * 8), 16);
    const mode = field(1);
    const size = field(6);
    const nameSize = field(11);
    const name = dec.decode(archive.subarray(off + 110, off + 110 + nameSize - 1));
    off += 110 + nameSize;
    off += pad4(off);
    const data = archive.subarray(off, off + size);
    off += size + pad4(size);
    if (name === "TRAILER!!!") break;
    out.push({ path: name, mode, size, data });
  }
  return out;
}
