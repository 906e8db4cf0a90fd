/**
 * A set of field paths, as structured-merge-diff's fieldpath.Set: a trie whose edges are path elements spelled as
 * in the `FieldsV1` wire format, with the members (paths that are in the set) marked at each level.
 *
 * ```
 * path element   fieldsV1 key                      conflict path (.String())
 * field "spec"   f:spec                            .spec
 * map-list item  k:{"name":"x"}  (keys sorted)     [name="x"]
 * set-list item  v:"a"                             [="a"]
 * other item     i:3                               [3]
 * ```
 * `{"f:spec": {"f:replicas": {}}}` holds `.spec.replicas`; a path that is a member and also has members below it
 * carries `".": {}` (a list item owned as a whole plus some of its fields).
 */
import { isObject, type Json, type JsonObject } from "../types.ts";

/** A path: its elements in FieldsV1 spelling (`f:spec`, `k:{"name":"x"}`, `v:"a"`, `i:0`). */
export type FieldPath = readonly string[];

/** The FieldsV1 spelling of a field name. */
export function fieldElement(name: string): string {
  return `f:${name}`;
}

/** The FieldsV1 spelling of an associative-list item key (key fields sorted by name). */
export function keyElement(key: Readonly<Record<string, Json>>): string {
  const sorted: JsonObject = {};
  for (const k of Object.keys(key).sort())
    Object.defineProperty(sorted, k, { value: key[k], enumerable: true, writable: true, configurable: true });
  return `k:${JSON.stringify(sorted)}`;
}

/** The FieldsV1 spelling of a set-list item. */
export function valueElement(v: Json): string {
  return `v:${JSON.stringify(v)}`;
}

/** The FieldsV1 spelling of a list index. */
export function indexElement(i: number): string {
  return `i:${i}`;
}

const RANK: Readonly<Record<string, number>> = { f: 0, k: 1, v: 2, i: 3 };

/** The order of path elements (structured-merge-diff: fields, then keys, values and indexes). */
export function compareElements(a: string, b: string): number {
  const ra = RANK[a[0]] ?? 4;
  const rb = RANK[b[0]] ?? 4;
  if (ra !== rb) return ra - rb;
  if (ra === 3) return Number(a.slice(2)) - Number(b.slice(2));
  return a < b ? -1 : a > b ? 1 : 0;
}

/** One element as printed in a conflict (`.spec`, `[name="x"]`, `[="a"]`, `[0]`). */
export function elementString(e: string): string {
  const body = e.slice(2);
  switch (e[0]) {
    case "f":
      return `.${body}`;
    case "k": {
      const key = JSON.parse(body) as JsonObject;
      return `[${Object.entries(key)
        .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
        .join(",")}]`;
    }
    case "v":
      return `[=${body}]`;
    default:
      return `[${body}]`;
  }
}

/** A path as structured-merge-diff prints it (`.spec.containers[name="web"].image`). */
export function pathString(p: FieldPath): string {
  return p.map(elementString).join("");
}

/** The error for a FieldsV1 document that does not decode. */
export class FieldsV1Error extends Error {
  override readonly name = "FieldsV1Error";
}

const ELEMENT = /^(f:.*|k:\{.*\}|v:.+|i:(0|[1-9][0-9]*))$/s;

/** A set of field paths (immutable once built: the operations return new sets). */
export class FieldSet {
  /** Elements at this level that are themselves members. */
  readonly #members = new Set<string>();
  /** Sub-sets below each element. */
  readonly #children = new Map<string, FieldSet>();

  /** True if the set holds no path. */
  empty(): boolean {
    if (this.#members.size > 0) return false;
    for (const c of this.#children.values()) if (!c.empty()) return false;
    return true;
  }

  /** Adds a path (in place; only while building). */
  insert(path: FieldPath): void {
    if (path.length === 1) this.#members.add(path[0]);
    else if (path.length > 1) this.#child(path[0]).insert(path.slice(1));
  }

  #child(e: string): FieldSet {
    let c = this.#children.get(e);
    if (!c) {
      c = new FieldSet();
      this.#children.set(e, c);
    }
    return c;
  }

  /** True if `path` is a member. */
  has(path: FieldPath): boolean {
    const node = this.node(path.slice(0, -1));
    return path.length > 0 && node !== undefined && node.#members.has(path[path.length - 1]);
  }

  /** The sub-set below `path` (undefined when nothing is below it). */
  node(path: FieldPath): FieldSet | undefined {
    if (path.length === 0) return this;
    return this.#children.get(path[0])?.node(path.slice(1));
  }

  /** True if `e` is a member at this level. */
  hasMember(e: string): boolean {
    return this.#members.has(e);
  }

  /** The sub-set below element `e` of this level. */
  child(e: string): FieldSet | undefined {
    return this.#children.get(e);
  }

  /** True if `e` is a member here or anything below `e` is. */
  touches(e: string): boolean {
    if (this.#members.has(e)) return true;
    const c = this.#children.get(e);
    return c !== undefined && !c.empty();
  }

  /** The elements mentioned at this level (members and parents of members). */
  elements(): string[] {
    const out = new Set<string>(this.#members);
    for (const [e, c] of this.#children) if (!c.empty()) out.add(e);
    return [...out].sort(compareElements);
  }

  /** Paths in either set. */
  union(other: FieldSet): FieldSet {
    const out = new FieldSet();
    for (const m of this.#members) out.#members.add(m);
    for (const m of other.#members) out.#members.add(m);
    for (const [e, c] of this.#children) out.#children.set(e, c.union(other.#children.get(e) ?? EMPTY));
    for (const [e, c] of other.#children) if (!this.#children.has(e)) out.#children.set(e, c.union(EMPTY));
    return out;
  }

  /** Paths in this set and in `other`. */
  intersection(other: FieldSet): FieldSet {
    const out = new FieldSet();
    for (const m of this.#members) if (other.#members.has(m)) out.#members.add(m);
    for (const [e, c] of this.#children) {
      const o = other.#children.get(e);
      if (!o) continue;
      const i = c.intersection(o);
      if (!i.empty()) out.#children.set(e, i);
    }
    return out;
  }

  /** Paths in this set that are not members of `other` (paths below a removed member stay). */
  difference(other: FieldSet): FieldSet {
    const out = new FieldSet();
    for (const m of this.#members) if (!other.#members.has(m)) out.#members.add(m);
    for (const [e, c] of this.#children) {
      const o = other.#children.get(e);
      const d = o ? c.difference(o) : c.union(EMPTY);
      if (!d.empty()) out.#children.set(e, d);
    }
    return out;
  }

  /** Paths in this set that are neither members of `other` nor below one. */
  recursiveDifference(other: FieldSet): FieldSet {
    const out = new FieldSet();
    for (const m of this.#members) if (!other.#members.has(m)) out.#members.add(m);
    for (const [e, c] of this.#children) {
      if (other.#members.has(e)) continue;
      const o = other.#children.get(e);
      const d = o ? c.recursiveDifference(o) : c.union(EMPTY);
      if (!d.empty()) out.#children.set(e, d);
    }
    return out;
  }

  /** Every member path, in structured-merge-diff's order (members of a level, then the levels below). */
  paths(prefix: FieldPath = []): FieldPath[] {
    const out: FieldPath[] = [...this.#members].sort(compareElements).map((m) => [...prefix, m]);
    for (const e of [...this.#children.keys()].sort(compareElements))
      out.push(...(this.#children.get(e) as FieldSet).paths([...prefix, e]));
    return out;
  }

  /** The FieldsV1 document of this set (keys in structured-merge-diff's order, `.` first). */
  toFieldsV1(): JsonObject {
    const out: JsonObject = {};
    for (const e of this.elements()) {
      const c = this.#children.get(e);
      const below = c && !c.empty() ? c.toFieldsV1() : undefined;
      out[e] = this.#members.has(e) ? (below ? { ".": {}, ...below } : {}) : (below as JsonObject);
    }
    return out;
  }

  /** Decodes a FieldsV1 document; a malformed one is a {@link FieldsV1Error}. */
  static fromFieldsV1(doc: Json | undefined): FieldSet {
    const out = new FieldSet();
    if (doc === undefined) return out;
    if (!isObject(doc)) throw new FieldsV1Error("fieldsV1 must be an object");
    out.#read(doc);
    return out;
  }

  #read(doc: JsonObject): void {
    for (const [e, v] of Object.entries(doc)) {
      if (e === ".") continue;
      if (!ELEMENT.test(e)) throw new FieldsV1Error(`invalid path element ${JSON.stringify(e)}`);
      if (e[0] === "k" && !isObject(safeParse(e.slice(2)))) throw new FieldsV1Error(`invalid key ${JSON.stringify(e)}`);
      if (!isObject(v)) throw new FieldsV1Error(`the value of ${JSON.stringify(e)} must be an object`);
      const keys = Object.keys(v);
      if (keys.length === 0 || Object.hasOwn(v, ".")) this.#members.add(e);
      if (keys.some((k) => k !== ".")) this.#child(e).#read(v);
    }
  }
}

function safeParse(s: string): unknown {
  try {
    return JSON.parse(s) as unknown;
  } catch {
    return undefined;
  }
}

const EMPTY = new FieldSet();

/** A set of the given paths. */
export function fieldSetOf(...paths: FieldPath[]): FieldSet {
  const s = new FieldSet();
  for (const p of paths) s.insert(p);
  return s;
}
