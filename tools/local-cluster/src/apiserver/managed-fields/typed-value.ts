/**
 * The typed-value operations of server-side apply (structured-merge-diff's typed package), over plain JSON and a
 * {@link FieldType}:
 * - {@link toFieldSet}: the fields a value sets (leaves, list items, empty or null map entries, undeclared keys);
 * - {@link compare}: the paths added, modified and removed between two values (a new object or list item counts
 *   as added itself, so a manager that created it owns it: the `".": {}` of FieldsV1);
 * - {@link mergeValues}: an applied configuration merged over the live object (the configuration wins; structs
 *   and maps merge per key, associative lists per item key, sets per value, everything else is replaced);
 * - {@link prune}: removes what a manager applied before and no longer applies, unless someone still owns it.
 */
import { cloneJson, isObject, type Json, type JsonObject, jsonEqual } from "../types.ts";
import {
  elementString,
  type FieldPath,
  FieldSet,
  fieldElement,
  indexElement,
  keyElement,
  valueElement,
} from "./field-set.ts";
import type { FieldType, ListInfo } from "./field-types.ts";

/** `o[k]` if `o` has its own `k` (never an inherited `constructor`, `__proto__`, ...). */
function own(o: JsonObject | undefined, k: string): Json | undefined {
  return o !== undefined && Object.hasOwn(o, k) ? o[k] : undefined;
}

/** Sets `o[k]` as an own property (a `__proto__` key stays data, never the prototype). */
function setOwn(o: JsonObject, k: string, v: Json): void {
  Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
}

/** A value that does not fit its type (an associative-list item without its key, a duplicate key). */
export class TypedValueError extends Error {
  override readonly name = "TypedValueError";
}

function itemElement(item: Json, index: number, info: ListInfo, path: () => FieldPath): string {
  if (info.type === "set") return valueElement(item);
  if (!isObject(item)) return indexElement(index);
  const key: Record<string, Json> = {};
  for (const k of info.keys) {
    const v = own(item, k) ?? (Object.hasOwn(info.keyDefaults, k) ? info.keyDefaults[k] : undefined);
    if (v === undefined)
      throw new TypedValueError(
        `${path().map(elementString).join("")}: element ${index}: associative list with keys has an element that omits key field ${JSON.stringify(k)} (and doesn't have default value)`,
      );
    setOwn(key, k, v);
  }
  return keyElement(key);
}

function indexItems(list: readonly Json[], info: ListInfo, path: () => FieldPath): Map<string, Json> {
  const out = new Map<string, Json>();
  for (let i = 0; i < list.length; i++) {
    const e = itemElement(list[i], i, info, path);
    if (out.has(e))
      throw new TypedValueError(`${path().map(elementString).join("")}: duplicate entries for key ${elementString(e)}`);
    out.set(e, list[i]);
  }
  return out;
}

/** The fields `v` sets (structured-merge-diff's ToFieldSet). */
export function toFieldSet(v: Json, t: FieldType): FieldSet {
  const out = new FieldSet();
  collect(v, t, [], out);
  return out;
}

function collect(v: Json, t: FieldType, path: FieldPath, out: FieldSet): void {
  if (v === null || t.atomic(v)) {
    out.insert(path);
    return;
  }
  if (Array.isArray(v)) {
    const info = t.list(v) as ListInfo;
    const items = indexItems(v, info, () => path);
    for (const [e, item] of items) {
      const p = [...path, e];
      collect(item, t.item(), p, out);
      out.insert(p);
    }
    return;
  }
  const obj = v as JsonObject;
  for (const k of Object.keys(obj)) {
    const child = obj[k];
    const p = [...path, fieldElement(k)];
    collect(child, t.field(k), p, out);
    if (child === null || (isObject(child) && Object.keys(child).length === 0) || !t.declared(k)) out.insert(p);
  }
}

/** What changed between two values. */
export interface Comparison {
  readonly added: FieldSet;
  readonly modified: FieldSet;
  readonly removed: FieldSet;
}

/** The paths added, modified and removed from `lhs` to `rhs` (structured-merge-diff's Compare). */
export function compare(lhs: Json, rhs: Json, t: FieldType): Comparison {
  const c: Comparison = { added: new FieldSet(), modified: new FieldSet(), removed: new FieldSet() };
  diff(lhs, rhs, t, undefined, c);
  return c;
}

/** A path being walked, innermost element first: extending it is O(1); it becomes an array only when recorded. */
interface PathLink {
  readonly e: string;
  readonly up: PathLink | undefined;
}

function pathOf(link: PathLink | undefined): string[] {
  const out: string[] = [];
  for (let l = link; l !== undefined; l = l.up) out.push(l.e);
  return out.reverse();
}

/**
 * {@link compare} of two objects restricted to the top-level fields `keep` accepts (a status write compares only
 * metadata and status: the rest cannot change, and walking it would cost every controller write).
 */
export function compareFields(
  lhs: JsonObject,
  rhs: JsonObject,
  t: FieldType,
  keep: (key: string) => boolean,
): Comparison {
  const c: Comparison = { added: new FieldSet(), modified: new FieldSet(), removed: new FieldSet() };
  for (const k of new Set([...Object.keys(lhs), ...Object.keys(rhs)])) {
    if (!keep(k)) continue;
    const l = own(lhs, k);
    const r = own(rhs, k);
    // Most writes change one part (spec, status or metadata): an equal part needs no walk.
    if (l !== undefined && r !== undefined && jsonEqual(l, r)) continue;
    diff(l, r, t.field(k), { e: fieldElement(k), up: undefined }, c);
  }
  return c;
}

function shape(v: Json | undefined): "object" | "array" | "scalar" | "none" {
  if (v === undefined) return "none";
  if (Array.isArray(v)) return "array";
  return isObject(v) ? "object" : "scalar";
}

function emptyish(v: Json | undefined): boolean {
  if (v === undefined) return true;
  if (Array.isArray(v)) return v.length === 0;
  return isObject(v) && Object.keys(v).length === 0;
}

function isLeaf(l: Json | undefined, r: Json | undefined, t: FieldType): boolean {
  const v = (r ?? l) as Json;
  const sl = shape(l);
  const sr = shape(r);
  if (sl !== "none" && sr !== "none" && sl !== sr) return true;
  if (v === null || t.atomic(v)) return true;
  if (l !== undefined && l !== null && t.atomic(l)) return true;
  return emptyish(l) && emptyish(r);
}

function listInfo(l: Json | undefined, r: Json | undefined, t: FieldType): ListInfo {
  const all = [...(Array.isArray(l) ? l : []), ...(Array.isArray(r) ? r : [])];
  return t.list(all) as ListInfo;
}

function diff(l: Json | undefined, r: Json | undefined, t: FieldType, path: PathLink | undefined, c: Comparison): void {
  if (isLeaf(l, r, t)) {
    if (l === undefined) c.added.insert(pathOf(path));
    else if (r === undefined) c.removed.insert(pathOf(path));
    else if (!jsonEqual(l, r)) c.modified.insert(pathOf(path));
    return;
  }
  if (Array.isArray(l ?? r)) {
    const info = listInfo(l, r, t);
    const li = Array.isArray(l) ? indexItems(l, info, () => pathOf(path)) : new Map<string, Json>();
    const ri = Array.isArray(r) ? indexItems(r, info, () => pathOf(path)) : new Map<string, Json>();
    for (const e of new Set([...li.keys(), ...ri.keys()])) diff(li.get(e), ri.get(e), t.item(), { e, up: path }, c);
  } else {
    const lo = (l ?? {}) as JsonObject;
    const ro = (r ?? {}) as JsonObject;
    for (const k of new Set([...Object.keys(lo), ...Object.keys(ro)]))
      diff(own(lo, k), own(ro, k), t.field(k), { e: fieldElement(k), up: path }, c);
  }
  if (path === undefined) return;
  if (l === undefined) c.added.insert(pathOf(path));
  else if (r === undefined) c.removed.insert(pathOf(path));
}

/** `config` merged over `live` (neither is modified); a null in the configuration removes the field. */
export function mergeValues(live: Json | undefined, config: Json, t: FieldType): Json {
  if (live === undefined || live === null || config === null || shape(live) !== shape(config) || t.atomic(config))
    return cloneJson(config);
  if (Array.isArray(config)) {
    const l = live as Json[];
    const info = listInfo(l, config, t);
    const li = indexItems(l, info, () => []);
    const ri = indexItems(config, info, () => []);
    const out: Json[] = [];
    for (const [e, item] of li) out.push(ri.has(e) ? mergeValues(item, ri.get(e) as Json, t.item()) : item);
    for (const [e, item] of ri) if (!li.has(e)) out.push(mergeValues(undefined, item, t.item()));
    return out;
  }
  const out: JsonObject = { ...(live as JsonObject) };
  for (const [k, v] of Object.entries(config as JsonObject)) {
    if (v === null) delete out[k];
    else setOwn(out, k, mergeValues(own(out, k), v, t.field(k)));
  }
  return out;
}

/**
 * Removes from `obj` (in place) what `last` (the fields a manager applied before) holds and `keep` (what every
 * manager owns now, the applier's new configuration included) does not: an owned item or leaf goes as a whole;
 * a struct or map that only leads to such fields loses them, and goes itself once emptied. Fields nobody ever
 * applied (defaults, other writers' unmanaged changes) stay.
 */
export function prune(obj: JsonObject, last: FieldSet, keep: FieldSet, t: FieldType): void {
  pruneChildren(obj, t, last, keep);
}

function size(v: Json): number {
  return Array.isArray(v) ? v.length : Object.keys(v as JsonObject).length;
}

function pruneChildren(v: Json, t: FieldType, last: FieldSet, keep: FieldSet | undefined): void {
  if (Array.isArray(v)) {
    const info = t.list(v) as ListInfo;
    const kept: Json[] = [];
    for (let i = 0; i < v.length; i++) {
      const e = itemElement(v[i], i, info, () => []);
      if (!(last.touches(e) && removeChild(v[i], t.item(), e, last, keep))) kept.push(v[i]);
    }
    v.splice(0, v.length, ...kept);
    return;
  }
  const o = v as JsonObject;
  for (const k of Object.keys(o)) {
    const e = fieldElement(k);
    if (last.touches(e) && removeChild(o[k], t.field(k), e, last, keep)) delete o[k];
  }
}

function removeChild(child: Json, ct: FieldType, e: string, last: FieldSet, keep: FieldSet | undefined): boolean {
  const kept = keep?.touches(e) ?? false;
  if (last.hasMember(e) && !kept) return true;
  const below = last.child(e);
  if (below && child !== null && typeof child === "object" && !ct.atomic(child)) {
    const before = size(child);
    pruneChildren(child, ct, below, keep?.child(e));
    if (before > 0 && size(child) === 0 && !kept) return true;
  }
  return false;
}
