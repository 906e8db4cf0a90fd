/**
 * Opens an image and its backing chain read-only, judging every link before it is opened:
 *
 *   top.qcow2 --backing "base.qcow2"--> <dir of top>/base.qcow2 --backing "../x.raw"--> refused (leaves allowedDir)
 *
 * A backing name is resolved relative to the directory of the image naming it (as QEMU does); absolute names,
 * protocol names (`json:`, `nbd:`...), names that leave `allowedDir` lexically or through a symlink, a file already
 * in the chain (same device and inode), and chains deeper than `maxChainDepth` are refused with a DiskImageError.
 */
import { constants as fsConstants } from "node:fs";
import { type FileHandle, open, realpath } from "node:fs/promises";
import { dirname, isAbsolute, relative, resolve, sep } from "node:path";
import { DiskImageError } from "./disk-image-error.ts";
import { type ImageLayer, Qcow2Layer, RawLayer, readAt } from "./disk-image-layers.ts";
import { hasQcow2Magic, parseQcow2Header, QCOW2_MIN_HEADER_READ, qcow2ClusterBits } from "./qcow2-header.ts";

/** How a chain is opened. */
export interface ChainOptions {
  readonly maxChainDepth: number;
  /** Backing files must resolve (after symlinks) inside this directory. */
  readonly allowedDir: string;
  readonly maxVirtualBytes: number;
}

/** The files opened so far: every handle to close, and the identity (dev:ino) of each file. */
interface ChainState {
  readonly handles: FileHandle[];
  readonly files: Set<string>;
}

/** An opened chain: its top layer and the state above. */
export interface OpenChain extends ChainState {
  readonly top: ImageLayer;
}

/**
 * Read-only, and O_NONBLOCK so that opening a FIFO planted in an image returns at once (to be refused as not a
 * file) instead of waiting forever for a writer; it changes nothing for regular files.
 */
export const READ_FLAGS = fsConstants.O_RDONLY | fsConstants.O_NONBLOCK;

/** Magic numbers of formats we recognise but do not read, so they are refused instead of passed as raw. */
const OTHER_FORMATS: ReadonlyArray<readonly [string, Buffer]> = [
  ["vmdk", Buffer.from("KDMV")],
  ["vhdx", Buffer.from("vhdxfile")],
  ["qed", Buffer.from("QED\0")],
  ["vdi", Buffer.from("<<< Oracle VM VirtualBox Disk Image >>>")],
];

/** The format of a file from its first bytes: qcow2 by magic, raw otherwise; other known formats are refused. */
export function detectFormat(start: Buffer, path: string): "raw" | "qcow2" {
  if (hasQcow2Magic(start)) return "qcow2";
  for (const [name, magic] of OTHER_FORMATS) {
    if (start.length >= magic.length && start.subarray(0, magic.length).equals(magic))
      throw new DiskImageError("UNSUPPORTED_FORMAT", path, `${name} images are not supported (only raw and qcow2)`);
  }
  return "raw";
}

/** Checks a raw file's size as a top-level disk. */
export function checkRawSize(size: number, path: string, maxVirtualBytes: number): void {
  if (size > maxVirtualBytes)
    throw new DiskImageError("TOO_LARGE", path, `size ${size} is over the limit of ${maxVirtualBytes} bytes`);
  if (size % 512 !== 0) throw new DiskImageError("BAD_SIZE", path, `size ${size} is not a multiple of 512`);
}

function inside(dir: string, path: string): boolean {
  const rel = relative(dir, path);
  return rel !== "" && !rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel);
}

async function resolveBacking(name: string, imagePath: string, options: ChainOptions): Promise<string> {
  const refuse = (why: string): never => {
    throw new DiskImageError("BACKING_PATH_REFUSED", imagePath, `backing file "${name}" ${why}`);
  };
  if (isAbsolute(name)) refuse("is an absolute path (only paths relative to the image are accepted)");
  if (/^[a-z][a-z0-9+.-]*:/i.test(name)) refuse("names a protocol, not a file");
  const candidate = resolve(dirname(imagePath), name);
  const allowed = resolve(options.allowedDir);
  if (!inside(allowed, candidate)) refuse(`leaves ${allowed}`);
  const real = await realpath(candidate).catch((err: unknown) => {
    throw new DiskImageError("IO_ERROR", imagePath, `backing file "${name}" cannot be opened`, { cause: err });
  });
  if (!inside(await realpath(allowed), real)) refuse(`leaves ${allowed} through a symlink`);
  return candidate;
}

interface Link {
  readonly path: string;
  readonly declared: string | undefined;
  readonly depth: number;
}

async function openFile(link: Link, chain: ChainState): Promise<{ fh: FileHandle; size: number }> {
  const fh = await open(link.path, READ_FLAGS).catch((err: unknown) => {
    throw new DiskImageError("IO_ERROR", link.path, "cannot open the image", { cause: err });
  });
  chain.handles.push(fh);
  const st = await fh.stat();
  if (!st.isFile()) throw new DiskImageError("NOT_A_FILE", link.path, "is not a regular file");
  const id = `${st.dev}:${st.ino}`;
  if (chain.files.has(id)) throw new DiskImageError("BACKING_LOOP", link.path, "backing chain loops back to this file");
  chain.files.add(id);
  return { fh, size: st.size };
}

async function openLink(link: Link, chain: ChainState, options: ChainOptions): Promise<ImageLayer> {
  const { fh, size } = await openFile(link, chain);
  const start = Buffer.alloc(Math.min(QCOW2_MIN_HEADER_READ, size));
  await readAt(fh, start, 0, start.length, 0);
  const format = link.declared ?? detectFormat(start, link.path);
  if (format === "raw") {
    if (link.depth === 0) checkRawSize(size, link.path, options.maxVirtualBytes);
    return new RawLayer(link.path, fh, size);
  }
  if (format !== "qcow2")
    throw new DiskImageError("UNSUPPORTED_FORMAT", link.path, `format "${format}" is not supported (raw, qcow2)`);
  const clusterBits = qcow2ClusterBits(start, size, link.path);
  const first = Buffer.alloc(Math.min(2 ** clusterBits, size));
  await readAt(fh, first, 0, first.length, 0);
  const header = parseQcow2Header(first, size, link.path, options);
  let backing: ImageLayer | undefined;
  if (header.backingName !== undefined) {
    if (link.depth + 1 > options.maxChainDepth)
      throw new DiskImageError("BACKING_TOO_DEEP", link.path, `backing chain is deeper than ${options.maxChainDepth}`);
    const path = await resolveBacking(header.backingName, link.path, options);
    backing = await openLink({ path, declared: header.backingFormat, depth: link.depth + 1 }, chain, options);
  }
  return new Qcow2Layer(link.path, fh, size, header, backing);
}

/**
 * Opens `path` (format `declared`, else detected) and its backing chain. On success the caller closes
 * `chain.handles`; on failure they are already closed.
 */
export async function openChain(path: string, declared: string | undefined, options: ChainOptions) {
  const chain: ChainState = { handles: [], files: new Set() };
  try {
    const top = await openLink({ path, declared, depth: 0 }, chain, options);
    const opened: OpenChain = { ...chain, top };
    return opened;
  } catch (err) {
    await closeAll(chain.handles);
    throw err;
  }
}

/** Closes every handle, ignoring close errors (the files were only read). */
export async function closeAll(handles: readonly FileHandle[]): Promise<void> {
  await Promise.allSettled(handles.map((fh) => fh.close()));
}
