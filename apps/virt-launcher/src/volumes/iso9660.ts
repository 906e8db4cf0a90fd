/**
 * A pure TypeScript ISO 9660 image writer: what KubeVirt makes with `xorrisofs -volid L -joliet -rock
 * -partition_cyl_align on` for cloud-init and config volumes, without any tool at run time. The same input and
 * timestamp always give the same bytes.
 *
 * Image layout (2048-byte blocks; ECMA-119, Joliet, SUSP 1.12 / RRIP 1.10):
 * ```
 * block 0..15   system area (zeros)
 * 16            primary volume descriptor (volume id = the label, e.g. "cidata", "config-2", "cfgdata")
 * 17            Joliet supplementary volume descriptor (escape "%/E", UCS-2 names)    [joliet]
 * next          volume descriptor set terminator
 * next          path tables: primary L, primary M, Joliet L, Joliet M (each from a block boundary)
 * next          primary directories, in path table order; records never cross a block
 * next          Rock Ridge continuation areas (the root's ER; NM entries too long for their record)  [rockRidge]
 * next          Joliet directories                                                     [joliet]
 * next          file data, one contiguous extent per file, in primary tree order
 * last          zero padding to a multiple of alignBytes (xorriso's -partition_cyl_align on: 1 MiB)
 * ```
 * Primary names are level-1 (8.3, upper case) and only a fallback: Linux reads the real names from Rock Ridge NM
 * entries (and modes from PX), Windows and other readers from Joliet.
 */
import { IsoImageError } from "./errors.ts";
import { checkName, compareIdentifiers, jolietIdentifiers, primaryIdentifiers } from "./iso9660-names.ts";
import {
  BLOCK_BYTES,
  ceEntry,
  directoryRecord,
  ER_BYTES,
  encodeUcs2,
  erEntry,
  MAX_RECORD_BYTES,
  nmEntries,
  PX_BYTES,
  pathTableRecord,
  pxEntry,
  recordBytes,
  spEntry,
  terminator,
  volumeDescriptor,
} from "./iso9660-records.ts";

/** One file of the image. Directories are implied by the paths. */
export interface IsoFileInput {
  /** Relative path with "/" between components, e.g. `openstack/latest/user_data`. Names are kept exactly. */
  readonly path: string;
  /** Contents; a string is written as UTF-8. */
  readonly data: Uint8Array | string;
  /** Permission bits for Rock Ridge PX (0..0o7777); default options.fileMode. */
  readonly mode?: number;
}

/** Refusal thresholds; each has a default in DEFAULT_ISO_LIMITS. */
export interface IsoLimits {
  /** Files plus directories (the root not counted). */
  readonly maxFiles: number;
  /** Bytes (UTF-8) in one path component; 253 is what Linux's Rock Ridge reader returns whole. */
  readonly maxNameBytes: number;
  /** Directory levels including the root (ECMA-119 6.8.2.1 allows 8). */
  readonly maxDepth: number;
  /** The whole image, padding included. */
  readonly maxImageBytes: number;
}

/** Defaults: Kubernetes caps a ConfigMap or Secret at 1 MiB, so 64 MiB leaves room for any config volume. */
export const DEFAULT_ISO_LIMITS: IsoLimits = {
  maxFiles: 4096,
  maxNameBytes: 253,
  maxDepth: 8,
  maxImageBytes: 64 * 1024 * 1024,
};

/** What writeIso9660 makes. */
export interface IsoImageOptions {
  /** The volume identifier (the filesystem label blkid reports): 1..32 printable ASCII characters, kept as given. */
  readonly volumeId: string;
  readonly files: readonly IsoFileInput[];
  /** Every date in the image (volume descriptors and records), so output is reproducible. Years 1900..2155. */
  readonly timestamp: Date;
  /** Rock Ridge (SUSP + RRIP: NM names, PX modes); default true. */
  readonly rockRidge?: boolean;
  /** Joliet tree; default true. */
  readonly joliet?: boolean;
  /** Image size is padded to a multiple of this many bytes (a multiple of 2048); default 1 MiB, as KubeVirt's. */
  readonly alignBytes?: number;
  /** PX permission bits of files without their own mode; default 0o644. */
  readonly fileMode?: number;
  /** PX permission bits of directories; default 0o755. */
  readonly directoryMode?: number;
  readonly limits?: Partial<IsoLimits>;
}

const S_IFDIR = 0o040000;
const S_IFREG = 0o100000;
const MiB = 1024 * 1024;

interface FileNode {
  readonly kind: "file";
  readonly name: string;
  readonly data: Buffer;
  readonly mode: number;
  block: number;
}
interface DirNode {
  readonly kind: "dir";
  readonly name: string;
  readonly parent: DirNode | undefined;
  readonly children: Map<string, FileNode | DirNode>;
  readonly primary: TreeView;
  readonly joliet: TreeView;
}
type Node = FileNode | DirNode;
/** One directory as one tree (primary or Joliet) lays it out. */
interface TreeView {
  number: number;
  block: number;
  bytes: number;
  records: PlannedRecord[];
}
interface PlannedRecord {
  readonly target: Node;
  readonly identifier: Buffer;
  readonly systemUse: Buffer[];
  /** Entries moved to a continuation area, and where that area went. */
  readonly area: Buffer | undefined;
  areaBlock: number;
  areaOffset: number;
  readonly offset: number;
}

function newDir(name: string, parent: DirNode | undefined): DirNode {
  const view = (): TreeView => ({ number: 0, block: 0, bytes: 0, records: [] });
  return { kind: "dir", name, parent, children: new Map(), primary: view(), joliet: view() };
}

function checkOptions(o: IsoImageOptions): void {
  if (o.volumeId.length < 1 || o.volumeId.length > 32 || !/^[\x20-\x7e]+$/.test(o.volumeId)) {
    throw new IsoImageError(
      "INVALID_VOLUME_ID",
      `Cannot use volume id ${JSON.stringify(o.volumeId)}: want 1..32 printable ASCII characters`,
    );
  }
  const year = o.timestamp.getUTCFullYear();
  if (Number.isNaN(o.timestamp.getTime()) || year < 1900 || year > 2155) {
    throw new IsoImageError(
      "INVALID_OPTION",
      `Cannot record the timestamp ${String(o.timestamp)}: want a year in 1900..2155`,
    );
  }
  const align = o.alignBytes ?? MiB;
  if (!Number.isInteger(align) || align < BLOCK_BYTES || align % BLOCK_BYTES !== 0 || align > 64 * MiB) {
    throw new IsoImageError("INVALID_OPTION", `Cannot align to ${align} bytes: want a multiple of 2048 up to 64 MiB`);
  }
  for (const mode of [o.fileMode, o.directoryMode, ...o.files.map((f) => f.mode)]) {
    if (mode !== undefined && (!Number.isInteger(mode) || mode < 0 || mode > 0o7777)) {
      throw new IsoImageError("INVALID_OPTION", `Cannot use mode ${mode}: want permission bits 0..0o7777`);
    }
  }
}

function buildTree(o: IsoImageOptions, limits: IsoLimits): DirNode {
  const root = newDir("", undefined);
  let count = 0;
  for (const file of o.files) {
    const parts = file.path.split("/");
    if (parts.length > limits.maxDepth) {
      throw new IsoImageError("PATH_TOO_DEEP", `Cannot place "${file.path}": deeper than ${limits.maxDepth} levels`, {
        path: file.path,
      });
    }
    for (const part of parts) checkName(part, limits.maxNameBytes, file.path);
    let dir = root;
    for (const part of parts.slice(0, -1)) {
      let next = dir.children.get(part);
      if (next === undefined) {
        next = newDir(part, dir);
        dir.children.set(part, next);
        count++;
      } else if (next.kind === "file") {
        throw new IsoImageError(
          "PATH_CONFLICT",
          `Cannot use "${part}" as a directory in "${file.path}": it is a file`,
          { path: file.path },
        );
      }
      dir = next;
    }
    const leaf = parts[parts.length - 1];
    const existing = dir.children.get(leaf);
    if (existing !== undefined) {
      const code = existing.kind === "file" ? "DUPLICATE_PATH" : "PATH_CONFLICT";
      throw new IsoImageError(code, `Cannot add "${file.path}" twice or as both file and directory`, {
        path: file.path,
      });
    }
    const data =
      typeof file.data === "string"
        ? Buffer.from(file.data, "utf8")
        : Buffer.from(file.data.buffer, file.data.byteOffset, file.data.byteLength);
    if (data.length > limits.maxImageBytes || data.length > 0xffffffff) {
      throw new IsoImageError(
        "IMAGE_TOO_LARGE",
        `Cannot add "${file.path}" of ${data.length} bytes: over ${limits.maxImageBytes} bytes`,
        { path: file.path },
      );
    }
    dir.children.set(leaf, { kind: "file", name: leaf, data, mode: file.mode ?? o.fileMode ?? 0o644, block: 0 });
    count++;
    if (count > limits.maxFiles) {
      throw new IsoImageError("TOO_MANY_FILES", `Cannot hold more than ${limits.maxFiles} files and directories`, {
        path: file.path,
      });
    }
  }
  return root;
}

/** Directories in path table order (ECMA-119 9.4: by level, then parent number, then identifier). */
function pathTableOrder(root: DirNode, tree: "primary" | "joliet", sortedChildren: (d: DirNode) => Node[]): DirNode[] {
  const order: DirNode[] = [root];
  for (let i = 0; i < order.length; i++) {
    order[i][tree].number = i + 1;
    for (const child of sortedChildren(order[i])) if (child.kind === "dir") order.push(child);
  }
  return order;
}

interface Layout {
  readonly rockRidge: boolean;
  readonly joliet: boolean;
  readonly fileMode: number;
  readonly directoryMode: number;
  readonly timestamp: Date;
}

function subdirCount(dir: DirNode): number {
  let n = 0;
  for (const child of dir.children.values()) if (child.kind === "dir") n++;
  return n;
}

function px(node: Node, layout: Layout): Buffer {
  if (node.kind === "file") return pxEntry(S_IFREG | node.mode, 1, 0, 0);
  return pxEntry(S_IFDIR | layout.directoryMode, 2 + subdirCount(node), 0, 0);
}

/** The SUSP entries of one primary record, with what overflows moved to a continuation area. */
function rockEntries(
  target: Node,
  identifierBytes: number,
  which: "." | ".." | "child",
  root: boolean,
  layout: Layout,
): { inline: Buffer[]; area: Buffer | undefined } {
  if (!layout.rockRidge) return { inline: [], area: undefined };
  if (which === "." && root)
    return { inline: [spEntry(), px(target, layout), ceEntry(0, 0, ER_BYTES)], area: erEntry() };
  if (which !== "child") return { inline: [px(target, layout)], area: undefined };
  const nm = nmEntries(Buffer.from(target.name, "utf8"));
  const inlineBytes = PX_BYTES + nm.reduce((sum, e) => sum + e.length, 0);
  if (recordBytes(identifierBytes, inlineBytes) <= MAX_RECORD_BYTES)
    return { inline: [px(target, layout), ...nm], area: undefined };
  const area = Buffer.concat(nm);
  return { inline: [px(target, layout), ceEntry(0, 0, area.length)], area };
}

function planDirectory(
  dir: DirNode,
  tree: "primary" | "joliet",
  ids: Map<Node, string>,
  layout: Layout,
  isRoot: boolean,
): void {
  const view = dir[tree];
  const encode = (id: string): Buffer => (tree === "joliet" ? encodeUcs2(id) : Buffer.from(id, "ascii"));
  const entries: { target: Node; identifier: Buffer; which: "." | ".." | "child" }[] = [
    { target: dir, identifier: Buffer.from([0]), which: "." },
    { target: dir.parent ?? dir, identifier: Buffer.from([1]), which: ".." },
    ...sortChildren(dir, ids).map((c) => ({ target: c, identifier: encode(ids.get(c)!), which: "child" as const })),
  ];
  let offset = 0;
  view.records = entries.map((e) => {
    const { inline, area } =
      tree === "primary"
        ? rockEntries(e.target, e.identifier.length, e.which, isRoot, layout)
        : { inline: [], area: undefined };
    const systemUseBytes = inline.reduce((sum, b) => sum + b.length, 0);
    const bytes = recordBytes(e.identifier.length, systemUseBytes);
    if ((offset % BLOCK_BYTES) + bytes > BLOCK_BYTES) offset = Math.ceil(offset / BLOCK_BYTES) * BLOCK_BYTES;
    const record = {
      target: e.target,
      identifier: e.identifier,
      systemUse: inline,
      area,
      areaBlock: 0,
      areaOffset: 0,
      offset,
    };
    offset += bytes;
    return record;
  });
  view.bytes = Math.ceil(offset / BLOCK_BYTES) * BLOCK_BYTES;
}

function sortChildren(dir: DirNode, ids: Map<Node, string>): Node[] {
  return [...dir.children.values()].sort((a, b) => compareIdentifiers(ids.get(a)!, ids.get(b)!));
}

function assignIdentifiers(root: DirNode, joliet: boolean): Map<Node, string> {
  const ids = new Map<Node, string>();
  const walk = (dir: DirNode): void => {
    const children = [...dir.children.values()];
    const entries = children.map((c) => ({ name: c.name, isDirectory: c.kind === "dir" }));
    const names = joliet ? jolietIdentifiers(entries) : primaryIdentifiers(entries);
    children.forEach((c, i) => {
      ids.set(c, names[i]);
      if (c.kind === "dir") walk(c);
    });
  };
  walk(root);
  return ids;
}

function pathTable(dirs: DirNode[], tree: "primary" | "joliet", ids: Map<Node, string>, bigEndian: boolean): Buffer {
  return Buffer.concat(
    dirs.map((d) => {
      const id =
        d.parent === undefined
          ? Buffer.from([0])
          : tree === "joliet"
            ? encodeUcs2(ids.get(d)!)
            : Buffer.from(ids.get(d)!, "ascii");
      return pathTableRecord(id, d[tree].block, (d.parent ?? d)[tree].number, bigEndian);
    }),
  );
}

const blocksFor = (bytes: number): number => Math.ceil(bytes / BLOCK_BYTES);

/**
 * Writes an ISO 9660 image of `options.files` and returns it. Throws IsoImageError (before allocating the image)
 * when an input breaks a rule or a limit; never returns a partial image. Synchronous and pure: a 1 MiB config
 * image takes a few milliseconds (docs/decisions/0008-iso9660-writer.md).
 */
export function writeIso9660(options: IsoImageOptions): Buffer {
  checkOptions(options);
  const limits: IsoLimits = { ...DEFAULT_ISO_LIMITS, ...options.limits };
  const layout: Layout = {
    rockRidge: options.rockRidge ?? true,
    joliet: options.joliet ?? true,
    fileMode: options.fileMode ?? 0o644,
    directoryMode: options.directoryMode ?? 0o755,
    timestamp: options.timestamp,
  };
  const root = buildTree(options, limits);
  const primaryIds = assignIdentifiers(root, false);
  const jolietIds = assignIdentifiers(root, true);
  const primaryDirs = pathTableOrder(root, "primary", (d) => sortChildren(d, primaryIds));
  const jolietDirs = layout.joliet ? pathTableOrder(root, "joliet", (d) => sortChildren(d, jolietIds)) : [];
  for (const d of primaryDirs) planDirectory(d, "primary", primaryIds, layout, d === root);
  for (const d of jolietDirs) planDirectory(d, "joliet", jolietIds, layout, d === root);

  // Sizes are known now; block numbers follow. Path table sizes do not depend on block numbers.
  const pathTableBytes = pathTable(primaryDirs, "primary", primaryIds, false).length;
  const jolietPathTableBytes = layout.joliet ? pathTable(jolietDirs, "joliet", jolietIds, false).length : 0;
  let next = 16 + (layout.joliet ? 2 : 1) + 1;
  const lPath = next;
  next += blocksFor(pathTableBytes);
  const mPath = next;
  next += blocksFor(pathTableBytes);
  const jlPath = next;
  next += layout.joliet ? blocksFor(jolietPathTableBytes) : 0;
  const jmPath = next;
  next += layout.joliet ? blocksFor(jolietPathTableBytes) : 0;
  for (const d of primaryDirs) {
    d.primary.block = next;
    next += d.primary.bytes / BLOCK_BYTES;
  }
  next = placeAreas(primaryDirs, next);
  for (const d of jolietDirs) {
    d.joliet.block = next;
    next += d.joliet.bytes / BLOCK_BYTES;
  }
  const files = primaryDirs.flatMap((d) =>
    d.primary.records.flatMap((r) => (r.target.kind === "file" ? [r.target] : [])),
  );
  for (const f of files) {
    // An empty file has no extent; it points at block 0, as genisoimage's do.
    f.block = f.data.length === 0 ? 0 : next;
    next += blocksFor(f.data.length);
  }
  const align = options.alignBytes ?? MiB;
  const totalBytes = Math.ceil((next * BLOCK_BYTES) / align) * align;
  if (totalBytes > limits.maxImageBytes) {
    throw new IsoImageError(
      "IMAGE_TOO_LARGE",
      `Cannot write a ${totalBytes}-byte image: over the limit of ${limits.maxImageBytes} bytes`,
    );
  }

  const image = Buffer.alloc(totalBytes);
  const totalBlocks = totalBytes / BLOCK_BYTES;
  const pvd = {
    lPath,
    mPath,
    pathTableBytes,
    totalBlocks,
    rootBlock: root.primary.block,
    rootBytes: root.primary.bytes,
    ucs2: false,
    volumeId: options.volumeId,
    timestamp: options.timestamp,
  };
  volumeDescriptor(pvd).copy(image, 16 * BLOCK_BYTES);
  if (layout.joliet) {
    const joliet = { rootBlock: root.joliet.block, rootBytes: root.joliet.bytes, ucs2: true };
    const svd = { ...pvd, ...joliet, lPath: jlPath, mPath: jmPath, pathTableBytes: jolietPathTableBytes };
    volumeDescriptor(svd).copy(image, 17 * BLOCK_BYTES);
  }
  terminator().copy(image, (layout.joliet ? 18 : 17) * BLOCK_BYTES);
  pathTable(primaryDirs, "primary", primaryIds, false).copy(image, lPath * BLOCK_BYTES);
  pathTable(primaryDirs, "primary", primaryIds, true).copy(image, mPath * BLOCK_BYTES);
  if (layout.joliet) {
    pathTable(jolietDirs, "joliet", jolietIds, false).copy(image, jlPath * BLOCK_BYTES);
    pathTable(jolietDirs, "joliet", jolietIds, true).copy(image, jmPath * BLOCK_BYTES);
  }
  for (const d of primaryDirs) writeDirectory(image, d, "primary", options.timestamp);
  for (const d of jolietDirs) writeDirectory(image, d, "joliet", options.timestamp);
  for (const f of files) f.data.copy(image, f.block * BLOCK_BYTES);
  return image;
}

/** Packs the continuation areas from block `first` on (an area never crosses a block: Linux refuses that). */
function placeAreas(dirs: DirNode[], first: number): number {
  let block = first;
  let offset = 0;
  let used = false;
  for (const r of dirs.flatMap((d) => d.primary.records)) {
    if (r.area === undefined) continue;
    if (offset + r.area.length > BLOCK_BYTES) {
      block++;
      offset = 0;
    }
    r.areaBlock = block;
    r.areaOffset = offset;
    offset += r.area.length;
    used = true;
  }
  return used ? block + 1 : first;
}

function writeDirectory(image: Buffer, dir: DirNode, tree: "primary" | "joliet", date: Date): void {
  const view = dir[tree];
  const base = view.block * BLOCK_BYTES;
  for (const r of view.records) {
    const systemUse = r.systemUse.map((e) =>
      e.toString("ascii", 0, 2) === "CE" && r.area ? ceEntry(r.areaBlock, r.areaOffset, r.area.length) : e,
    );
    const t = r.target;
    const record = directoryRecord({
      extent: t.kind === "file" ? t.block : t[tree].block,
      dataLength: t.kind === "file" ? t.data.length : t[tree].bytes,
      date,
      isDirectory: t.kind === "dir",
      identifier: r.identifier,
      systemUse: Buffer.concat(systemUse),
    });
    record.copy(image, base + r.offset);
    if (r.area) r.area.copy(image, r.areaBlock * BLOCK_BYTES + r.areaOffset);
  }
}
