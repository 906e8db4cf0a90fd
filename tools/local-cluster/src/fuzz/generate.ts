/**
 * The fuzz lane's body generator: seeded, so a failing request is reproduced from (seed, iteration) alone.
 *
 *   Rng(seed, iteration)  --> fromSchema(OpenAPI v3 schema)   a value shaped by the served document, with some
 *                             |                               fields of the wrong type or out of range
 *                             `-> mutate(valid object)       one to four edits of a known-good object: a field
 *                                                            dropped, retyped, made huge or deep, or set to a
 *                                                            value that has broken a parser somewhere before
 *                             `-> rawBody()                  bytes that are not the JSON they claim to be
 */

/** JSON values. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A small fast seeded PRNG (sfc32), one per iteration: `new Rng(seed, i)`. */
export class Rng {
  #a: number;
  #b: number;
  #c: number;
  #d: number;

  constructor(seed: number, stream = 0) {
    this.#a = seed >>> 0;
    this.#b = (stream * 0x9e3779b9) >>> 0;
    this.#c = 0xdeadbeef;
    this.#d = 1;
    for (let i = 0; i < 15; i++) this.next();
  }

  /** A float in [0, 1). */
  next(): number {
    const t = (((this.#a + this.#b) | 0) + this.#d) | 0;
    this.#d = (this.#d + 1) | 0;
    this.#a = this.#b ^ (this.#b >>> 9);
    this.#b = (this.#c + (this.#c << 3)) | 0;
    this.#c = (this.#c << 21) | (this.#c >>> 11);
    this.#c = (this.#c + t) | 0;
    return (t >>> 0) / 4294967296;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** True with probability p. */
  chance(p: number): boolean {
    return this.next() < p;
  }

  /** One element of `items`. */
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)];
  }
}

/** Strings that broke (or could break) a parser, a validator or a printer somewhere. */
export const NASTY_STRINGS: readonly string[] = [
  "",
  " ",
  "\u0000",
  "\ud800",
  "🙂",
  "a\nb",
  "../../etc/passwd",
  "%00",
  "{{7*7}}",
  "<script>",
  "-",
  ".",
  "-1",
  "0",
  "1e400",
  "-1Gi",
  "99999999999999999999Ei",
  "1e2147483647",
  "1e3000000000",
  "0.0000000001",
  "64Mi",
  "NaN",
  "Infinity",
  "null",
  "true",
  "{}",
  "[]",
  "2006-01-02T15:04:05Z",
  "not-a-date",
  "kubevirt.io/v1",
  "default",
  "A".repeat(300),
  "x".repeat(70_000),
];

/** Numbers at the edges of JSON, JavaScript, int32, int64 and float64. */
export const NASTY_NUMBERS: readonly number[] = [
  0,
  -0,
  -1,
  1,
  0.5,
  -0.000001,
  255,
  65536,
  2147483647,
  2147483648,
  -2147483649,
  4294967296,
  2 ** 53,
  2 ** 63,
  -(2 ** 63),
  1e300,
  -1e300,
  5e-324,
];

/** A random JSON value of any type (nesting bounded by `depth`). */
export function anyValue(rng: Rng, depth = 3): Json {
  const k = rng.int(depth > 0 ? 8 : 5);
  if (k === 0) return null;
  if (k === 1) return rng.chance(0.5);
  if (k === 2) return rng.pick(NASTY_NUMBERS);
  if (k === 3 || k === 4) return rng.pick(NASTY_STRINGS);
  if (k === 5) return Array.from({ length: rng.int(4) }, () => anyValue(rng, depth - 1));
  if (k === 6) return deep(rng.int(3) === 0 ? 1500 : 50);
  const o: Record<string, Json> = {};
  for (let i = rng.int(4); i > 0; i--) o[rng.pick(NASTY_KEYS)] = anyValue(rng, depth - 1);
  return o;
}

const NASTY_KEYS = ["a", "", "__proto__", "constructor", "metadata", "spec", "status", "name", "x".repeat(300)];

/** A value nested `n` levels (arrays and objects alternating). */
function deep(n: number): Json {
  let v: Json = 1;
  for (let i = 0; i < n; i++) v = i % 2 ? [v] : { a: v };
  return v;
}

/** An OpenAPI v3 schema (the subset the served documents use). */
export interface Schema {
  readonly type?: string;
  readonly $ref?: string;
  readonly allOf?: readonly Schema[];
  readonly anyOf?: readonly Schema[];
  readonly oneOf?: readonly Schema[];
  readonly properties?: Readonly<Record<string, Schema>>;
  readonly additionalProperties?: Schema | boolean;
  readonly items?: Schema;
  readonly required?: readonly string[];
  readonly enum?: readonly Json[];
  readonly format?: string;
  readonly minimum?: number;
  readonly maximum?: number;
  readonly "x-kubernetes-int-or-string"?: boolean;
  readonly "x-kubernetes-preserve-unknown-fields"?: boolean;
}

/** Builds a value for `schema`; `$ref`s resolve in `components`. Mostly well-typed, sometimes not. */
export function fromSchema(rng: Rng, schema: Schema, components: Readonly<Record<string, Schema>>, depth = 8): Json {
  const resolved = resolve(schema, components);
  if (rng.chance(0.03)) return anyValue(rng, 2); // a wrong type now and then
  if (resolved.enum?.length) return rng.chance(0.9) ? rng.pick<Json>(resolved.enum) : rng.pick(NASTY_STRINGS);
  if (resolved["x-kubernetes-int-or-string"]) return rng.chance(0.5) ? rng.pick(NASTY_NUMBERS) : quantityLike(rng);
  const type = resolved.type ?? (resolved.properties ? "object" : undefined);
  switch (type) {
    case "object":
      return objectFrom(rng, resolved, components, depth);
    case "array":
      if (depth <= 0 || !resolved.items) return [];
      return Array.from({ length: rng.int(3) }, () => fromSchema(rng, resolved.items as Schema, components, depth - 1));
    case "string":
      return stringFor(rng, resolved);
    case "integer":
      return rng.chance(0.7) ? rng.int(100) : Math.trunc(rng.pick(NASTY_NUMBERS));
    case "number":
      return rng.chance(0.7) ? rng.next() * 100 : rng.pick(NASTY_NUMBERS);
    case "boolean":
      return rng.chance(0.5);
    default:
      return resolved["x-kubernetes-preserve-unknown-fields"] ? anyValue(rng, 2) : anyValue(rng, 1);
  }
}

function resolve(schema: Schema, components: Readonly<Record<string, Schema>>): Schema {
  let s = schema;
  for (let i = 0; i < 8; i++) {
    if (s.$ref) s = components[s.$ref.replace("#/components/schemas/", "")] ?? {};
    else if (s.allOf?.length === 1 && !s.properties) s = { ...s, ...s.allOf[0], allOf: undefined };
    else if (s.anyOf?.length) s = s.anyOf[0];
    else if (s.oneOf?.length) s = s.oneOf[0];
    else return s;
  }
  return s;
}

function objectFrom(rng: Rng, s: Schema, components: Readonly<Record<string, Schema>>, depth: number): Json {
  const o: Record<string, Json> = {};
  if (depth <= 0) return o;
  for (const [key, prop] of Object.entries(s.properties ?? {})) {
    if (s.required?.includes(key) || rng.chance(depth > 5 ? 0.6 : 0.3))
      o[key] = fromSchema(rng, prop, components, depth - 1);
  }
  if (typeof s.additionalProperties === "object")
    for (let i = rng.int(3); i > 0; i--)
      o[rng.pick(["a", "b.c/d", "memory", "cpu", ""])] = fromSchema(rng, s.additionalProperties, components, depth - 1);
  if (s["x-kubernetes-preserve-unknown-fields"] && rng.chance(0.3)) o[rng.pick(NASTY_KEYS)] = anyValue(rng, 2);
  return o;
}

function stringFor(rng: Rng, s: Schema): string {
  if (s.format === "date-time") return rng.chance(0.8) ? new Date(rng.int(2 ** 31) * 1000).toISOString() : "yesterday";
  if (s.format === "int-or-string" || s.format === "quantity") return quantityLike(rng);
  if (rng.chance(0.5)) return rng.pick(["a", "vm", "default", "x-1", "Always", "64Mi", "virtio", "pod"]);
  return rng.pick(NASTY_STRINGS);
}

function quantityLike(rng: Rng): string {
  return rng.pick(["64Mi", "1", "100m", "1e400", "-1Gi", "0", "99999999999999999999Ei", "1e2147483647", "abc", "1.5"]);
}

/** A copy of `obj` with one to four random edits (the metadata name and namespace are kept apart). */
export function mutate(rng: Rng, obj: Json): Json {
  const out = structuredClone(obj);
  for (let n = 1 + rng.int(4); n > 0; n--) edit(rng, out);
  return out;
}

function edit(rng: Rng, root: Json): void {
  // Walk to a random container inside the object.
  let node: Json = root;
  for (let i = 0; i < 12; i++) {
    const kids = childrenOf(node);
    if (kids.length === 0 || rng.chance(0.2)) break;
    const next = rng.pick(kids);
    if (typeof next[1] !== "object" || next[1] === null) break;
    node = next[1];
  }
  const kids = childrenOf(node);
  if (typeof node !== "object" || node === null) return;
  const key = kids.length > 0 && rng.chance(0.8) ? rng.pick(kids)[0] : rng.pick(NASTY_KEYS);
  const op = rng.int(6);
  const target = node;
  const set = (v: Json | undefined): void => {
    if (Array.isArray(target)) {
      const i = typeof key === "number" ? key : 0;
      if (v === undefined) target.splice(i, 1);
      else target[i] = v;
    } else if (v === undefined) delete (target as Record<string, Json>)[key as string];
    // An own data property, as JSON.parse makes it: `o.__proto__ = v` would swap the prototype instead (and a
    // later edit through it could write into Array.prototype of this very process, the servers' too).
    else Object.defineProperty(target, key, { value: v, enumerable: true, writable: true, configurable: true });
  };
  const current = Object.hasOwn(target, key) ? (target as Record<string, Json>)[key as string] : undefined;
  if (op === 0) set(undefined);
  else if (op === 1) set(anyValue(rng));
  else if (op === 2) set(rng.pick(NASTY_STRINGS));
  else if (op === 3) set(rng.pick(NASTY_NUMBERS));
  else if (op === 4) set(current === undefined ? null : [current, current]);
  else {
    // Long runs of a scalar; an object or array is repeated only a few times (2000 copies of a subtree that
    // later edits copy again would outgrow a string).
    const scalar = current === undefined || current === null || typeof current !== "object";
    const length = rng.pick(scalar ? [0, 1, 100, 2000] : [0, 1, 3]);
    set(Array.from({ length }, () => (current ?? 1) as Json));
  }
}

function childrenOf(node: Json): [string | number, Json][] {
  if (Array.isArray(node)) return node.map((v, i) => [i, v]);
  if (node && typeof node === "object") return Object.entries(node);
  return [];
}

/** `v` if it is a JSON object, else `{}` (a root that must carry apiVersion, kind and metadata). */
export function asObject(v: Json): { [key: string]: Json } {
  return v !== null && typeof v === "object" && !Array.isArray(v) ? v : {};
}

/** Bytes that claim to be JSON and are not quite: truncated, doubled, binary, huge numbers, a UTF-8 BOM. */
export function rawBody(rng: Rng, valid: Json): Buffer {
  const text = JSON.stringify(valid);
  switch (rng.int(8)) {
    case 0:
      return Buffer.from(text.slice(0, rng.int(text.length)));
    case 1:
      return Buffer.from(text + text);
    case 2:
      return Buffer.from(Array.from({ length: rng.int(200) }, () => rng.int(256)));
    case 3:
      return Buffer.from(text.replace(/:\s*(\d+|"[^"]*")/, ":1e999999"));
    case 4:
      return Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text)]);
    case 5:
      return Buffer.from(`{"a":${"[".repeat(100_000)}`);
    case 6:
      return Buffer.from(text.replace(/"(\w+)":/, '"$1":1,"$1":'));
    default:
      return Buffer.from(rng.pick(["null", "[]", '"str"', "12", "{}", ""]));
  }
}
