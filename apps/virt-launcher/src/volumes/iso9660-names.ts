/**
 * Names in an ISO 9660 image. A file's real name (what Rock Ridge's NM entry and Linux show) is checked here; the
 * primary tree's ECMA-119 level-1 identifier (8.3 upper-case d-characters, `;1` on files) and the Joliet identifier
 * (UCS-2, at most 64 characters) are derived from it, made unique within their directory, and sorted as ECMA-119
 * 9.3 orders directory records.
 */
import { IsoImageError } from "./errors.ts";

const D_CHARACTER = /[A-Z0-9_]/;
// Joliet forbids these and the C0 controls (Joliet specification, section 3.3).
const JOLIET_FORBIDDEN = new Set(["*", "/", ":", ";", "?", "\\"]);
/** Joliet identifiers are at most 64 UCS-2 characters, the version suffix included. */
export const JOLIET_MAX_CHARS = 64;

/**
 * Checks one path component (a real file or directory name) and returns it. Throws IsoImageError INVALID_NAME or
 * NAME_TOO_LONG. Any other character is allowed: Rock Ridge carries the name as bytes.
 */
export function checkName(name: string, maxNameBytes: number, path: string): string {
  if (name === "" || name === "." || name === "..") {
    throw new IsoImageError("INVALID_NAME", `Cannot use "${name}" as a file name in "${path}"`, { path });
  }
  if (!name.isWellFormed()) {
    throw new IsoImageError("INVALID_NAME", `Cannot use a name that is not well-formed Unicode in "${path}"`, { path });
  }
  // C0 controls, DEL and NUL: no tool in a guest handles them in names, and the NUL would end the name for Linux.
  if ([...name].some((ch) => ch.charCodeAt(0) < 0x20 || ch === "\u007f")) {
    const shown = JSON.stringify(name);
    throw new IsoImageError("INVALID_NAME", `Cannot use a control character in the name ${shown}`, { path });
  }

  const bytes = Buffer.byteLength(name, "utf8");
  if (bytes > maxNameBytes) {
    throw new IsoImageError(
      "NAME_TOO_LONG",
      `Cannot use a ${bytes}-byte name (at most ${maxNameBytes} bytes) in "${path.slice(0, 80)}..."`,
      { path },
    );
  }
  return name;
}

function toDCharacters(text: string, max: number): string {
  let out = "";
  for (const ch of text.toUpperCase()) {
    if (out.length === max) break;
    out += D_CHARACTER.test(ch) ? ch : "_";
  }
  return out;
}

/** Splits a name into the 8-character base and 3-character extension of a level-1 file identifier. */
function level1Parts(name: string, isDirectory: boolean): { base: string; ext: string } {
  const dot = isDirectory ? -1 : name.lastIndexOf(".");
  const baseText = dot > 0 ? name.slice(0, dot) : name.replace(/^\./, "_");
  const base = toDCharacters(baseText, 8) || "_";
  const ext = dot > 0 ? toDCharacters(name.slice(dot + 1), 3) : "";
  return { base, ext };
}

function level1Identifier(base: string, ext: string, isDirectory: boolean): string {
  if (isDirectory) return base;
  return `${base}.${ext};1`;
}

/**
 * ECMA-119 level-1 identifiers for the names of one directory, in input order: unique (a clash gets a decimal
 * counter in place of the base's last characters), files with `;1`.
 */
export function primaryIdentifiers(entries: readonly { name: string; isDirectory: boolean }[]): string[] {
  const taken = new Set<string>();
  return entries.map(({ name, isDirectory }) => {
    const { base, ext } = level1Parts(name, isDirectory);
    let id = level1Identifier(base, ext, isDirectory);
    for (let n = 1; taken.has(id); n++) {
      const suffix = String(n);
      id = level1Identifier(base.slice(0, 8 - suffix.length) + suffix, ext, isDirectory);
    }
    taken.add(id);
    return id;
  });
}

function jolietClean(name: string): string {
  let out = "";
  for (const ch of name) {
    const forbidden = JOLIET_FORBIDDEN.has(ch) || ch.charCodeAt(0) < 0x20;
    out += forbidden ? "_" : ch;
  }
  return out;
}

/** Cuts `text` to at most `units` UTF-16 code units without splitting a surrogate pair. */
function cutUtf16(text: string, units: number): string {
  if (text.length <= units) return text;
  const cut = text.slice(0, units);
  return /[\ud800-\udbff]$/.test(cut) ? cut.slice(0, -1) : cut;
}

/**
 * Joliet identifiers for the names of one directory, in input order: forbidden characters become `_`, names are cut
 * to fit 64 characters (files keep room for `;1`), and a clash gets `~N` before the cut.
 */
export function jolietIdentifiers(entries: readonly { name: string; isDirectory: boolean }[]): string[] {
  const taken = new Set<string>();
  return entries.map(({ name, isDirectory }) => {
    const version = isDirectory ? "" : ";1";
    const room = JOLIET_MAX_CHARS - version.length;
    const clean = jolietClean(name);
    let id = cutUtf16(clean, room) + version;
    for (let n = 1; taken.has(id); n++) {
      const suffix = `~${n}`;
      id = cutUtf16(clean, room - suffix.length) + suffix + version;
    }
    taken.add(id);
    return id;
  });
}

function splitIdentifier(id: string): [string, string, string] {
  const semi = id.lastIndexOf(";");
  const withoutVersion = semi >= 0 ? id.slice(0, semi) : id;
  const version = semi >= 0 ? id.slice(semi + 1) : "";
  const dot = withoutVersion.lastIndexOf(".");
  if (dot < 0) return [withoutVersion, "", version];
  return [withoutVersion.slice(0, dot), withoutVersion.slice(dot + 1), version];
}

function comparePadded(a: string, b: string): number {
  const length = Math.max(a.length, b.length);
  const pa = a.padEnd(length, " ");
  const pb = b.padEnd(length, " ");
  if (pa === pb) return 0;
  return pa < pb ? -1 : 1;
}

/** ECMA-119 9.3 order of two identifiers: name, then extension (both padded with spaces), then version descending. */
export function compareIdentifiers(a: string, b: string): number {
  const [na, ea, va] = splitIdentifier(a);
  const [nb, eb, vb] = splitIdentifier(b);
  return comparePadded(na, nb) || comparePadded(ea, eb) || comparePadded(vb, va);
}
