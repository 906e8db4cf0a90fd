/**
 * What a dynamically linked ELF64 program needs at run time, read from its program headers (no readelf): the
 * interpreter (PT_INTERP, `/lib64/ld-linux-x86-64.so.2`) and the shared libraries it names (DT_NEEDED of PT_DYNAMIC,
 * strings from DT_STRTAB, whose address is mapped to a file offset through the PT_LOAD segments).
 *
 *   ELF header -> program headers -> PT_INTERP (path) | PT_DYNAMIC -> DT_NEEDED offsets + DT_STRTAB vaddr
 *                                                      PT_LOAD     -> vaddr -> file offset
 */

/** An ELF file this reader cannot use; `message` says why. */
export class ElfFormatError extends Error {
  override name = "ElfFormatError";
}

/** The run-time dependencies of one program or library. */
export interface ElfDependencies {
  /** PT_INTERP: the dynamic loader's path, absent for a library or a static program. */
  readonly interpreter?: string;
  /** DT_NEEDED, in order. */
  readonly needed: readonly string[];
}

const PT_LOAD = 1;
const PT_DYNAMIC = 2;
const PT_INTERP = 3;
const DT_NULL = 0n;
const DT_NEEDED = 1n;
const DT_STRTAB = 5n;

function cString(data: Buffer, offset: number): string {
  const end = data.indexOf(0, offset);
  if (offset < 0 || offset >= data.length || end < 0) throw new ElfFormatError(`string at ${offset} is out of bounds`);
  return data.toString("latin1", offset, end);
}

interface ProgramHeaders {
  readonly loads: readonly { vaddr: bigint; offset: bigint; filesz: bigint }[];
  readonly interpreter?: string;
  readonly dynamic?: { offset: number; size: number };
}

function programHeaders(data: Buffer): ProgramHeaders {
  if (data.length < 64 || data.readUInt32BE(0) !== 0x7f454c46) throw new ElfFormatError("not an ELF file");
  if (data[4] !== 2 || data[5] !== 1) throw new ElfFormatError("not a little-endian ELF64 file");
  const phoff = Number(data.readBigUInt64LE(0x20));
  const phentsize = data.readUInt16LE(0x36);
  const phnum = data.readUInt16LE(0x38);
  if (phentsize < 56 || phoff + phnum * phentsize > data.length) throw new ElfFormatError("program headers truncated");
  const loads: { vaddr: bigint; offset: bigint; filesz: bigint }[] = [];
  let interpreter: string | undefined;
  let dynamic: { offset: number; size: number } | undefined;
  for (let i = 0; i < phnum; i++) {
    const at = phoff + i * phentsize;
    const type = data.readUInt32LE(at);
    const offset = data.readBigUInt64LE(at + 0x08);
    const vaddr = data.readBigUInt64LE(at + 0x10);
    const filesz = data.readBigUInt64LE(at + 0x20);
    if (type === PT_LOAD) loads.push({ vaddr, offset, filesz });
    else if (type === PT_INTERP) interpreter = cString(data, Number(offset));
    else if (type === PT_DYNAMIC) dynamic = { offset: Number(offset), size: Number(filesz) };
  }
  return { loads, ...(interpreter ? { interpreter } : {}), ...(dynamic ? { dynamic } : {}) };
}

/** DT_NEEDED string offsets and the DT_STRTAB address of a PT_DYNAMIC segment. */
function dynamicEntries(
  data: Buffer,
  dynamic: { offset: number; size: number },
): { needed: bigint[]; strtab?: bigint } {
  if (dynamic.offset + dynamic.size > data.length) throw new ElfFormatError("dynamic section truncated");
  const needed: bigint[] = [];
  let strtab: bigint | undefined;
  for (let at = dynamic.offset; at + 16 <= dynamic.offset + dynamic.size; at += 16) {
    const tag = data.readBigInt64LE(at);
    const value = data.readBigUInt64LE(at + 8);
    if (tag === DT_NULL) break;
    if (tag === DT_NEEDED) needed.push(value);
    else if (tag === DT_STRTAB) strtab = value;
  }
  return { needed, ...(strtab !== undefined ? { strtab } : {}) };
}

/** Reads the interpreter and DT_NEEDED of a little-endian ELF64 file. Throws ElfFormatError on anything else. */
export function elfDependencies(data: Buffer): ElfDependencies {
  const { loads, interpreter, dynamic } = programHeaders(data);
  const base = { ...(interpreter ? { interpreter } : {}) };
  if (!dynamic) return { ...base, needed: [] };
  const { needed, strtab } = dynamicEntries(data, dynamic);
  if (needed.length === 0) return { ...base, needed: [] };
  if (strtab === undefined) throw new ElfFormatError("DT_NEEDED without DT_STRTAB");
  const segment = loads.find((l) => strtab >= l.vaddr && strtab < l.vaddr + l.filesz);
  if (!segment) throw new ElfFormatError("DT_STRTAB is in no loaded segment");
  const strings = segment.offset + (strtab - segment.vaddr);
  return { ...base, needed: needed.map((o) => cString(data, Number(strings + o))) };
}
