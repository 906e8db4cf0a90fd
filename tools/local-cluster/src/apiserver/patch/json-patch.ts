/**
 * RFC 6902 JSON patch (add, remove, replace, move, copy, test). A malformed patch document is a 400; an operation
 * that fails (a missing path, a failed `test`) is a 422, as kube-apiserver's patch handler answers.
 */
import { type ApiError, badRequest, statusError } from "../errors.ts";
import { isObject, type Json } from "../types.ts";

/** One operation. */
interface Op {
  op: string;
  path: string;
  value?: Json;
  from?: string;
}

function failed(msg: string): ApiError {
  return statusError(422, "Invalid", `the server rejected our request due to an error in our request: ${msg}`);
}

function pointer(p: string): string[] {
  if (p === "") return [];
  if (!p.startsWith("/")) throw badRequest(`json patch: invalid path "${p}"`);
  return p
    .slice(1)
    .split("/")
    .map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
}

function parentOf(doc: Json, tokens: string[], path: string): { parent: Json; key: string } {
  let cur: Json = doc;
  for (const t of tokens.slice(0, -1)) {
    if (Array.isArray(cur)) cur = cur[Number(t)];
    else if (isObject(cur)) cur = cur[t];
    else throw failed(`doc is missing path: "${path}"`);
    if (cur === undefined) throw failed(`doc is missing path: "${path}"`);
  }
  return { parent: cur, key: tokens[tokens.length - 1] };
}

function getAt(doc: Json, path: string): Json {
  let cur: Json | undefined = doc;
  for (const t of pointer(path)) {
    if (Array.isArray(cur)) cur = /^\d+$/.test(t) ? cur[Number(t)] : undefined;
    else if (isObject(cur)) cur = cur[t];
    else cur = undefined;
    if (cur === undefined) throw failed(`doc is missing path: "${path}"`);
  }
  return cur;
}

function index(arr: Json[], key: string, path: string, forAdd: boolean): number {
  if (forAdd && key === "-") return arr.length;
  if (!/^\d+$/.test(key)) throw failed(`Unable to access invalid index: ${key}`);
  const i = Number(key);
  if (i > arr.length || (!forAdd && i === arr.length))
    throw failed(`Unable to access invalid index: ${i} for path "${path}"`);
  return i;
}

function add(doc: Json, path: string, value: Json): Json {
  const tokens = pointer(path);
  if (tokens.length === 0) return value;
  const { parent, key } = parentOf(doc, tokens, path);
  if (Array.isArray(parent)) parent.splice(index(parent, key, path, true), 0, value);
  else if (isObject(parent)) parent[key] = value;
  else throw failed(`doc is missing path: "${path}"`);
  return doc;
}

function remove(doc: Json, path: string): Json {
  const tokens = pointer(path);
  const { parent, key } = parentOf(doc, tokens, path);
  if (Array.isArray(parent)) parent.splice(index(parent, key, path, false), 1);
  else if (isObject(parent) && Object.hasOwn(parent, key)) delete parent[key];
  else throw failed(`Unable to remove nonexistent key: ${key}: missing value`);
  return doc;
}

/** Parses and validates a JSON patch document (400 if it is not an array of operations). */
export function parseJsonPatch(body: unknown): Op[] {
  if (!Array.isArray(body)) throw badRequest("json: cannot unmarshal object into Go value of type jsonpatch.Patch");
  for (const op of body) {
    if (!isObject(op) || typeof op.op !== "string" || typeof op.path !== "string")
      throw badRequest('json patch: each operation needs "op" and "path"');
    if (!["add", "remove", "replace", "move", "copy", "test"].includes(op.op))
      throw badRequest(`Unexpected kind: ${op.op}`);
  }
  return body as Op[];
}

/** Applies the operations to a copy of `doc`. */
export function applyJsonPatch(doc: Json, ops: Op[]): Json {
  let out = structuredClone(doc);
  for (const op of ops) {
    switch (op.op) {
      case "add":
        out = add(out, op.path, structuredClone(op.value ?? null));
        break;
      case "remove":
        out = remove(out, op.path);
        break;
      case "replace":
        getAt(out, op.path);
        out = add(remove(out, op.path), op.path, structuredClone(op.value ?? null));
        break;
      case "move": {
        const v = getAt(out, op.from ?? "");
        out = add(remove(out, op.from ?? ""), op.path, v);
        break;
      }
      case "copy":
        out = add(out, op.path, structuredClone(getAt(out, op.from ?? "")));
        break;
      case "test": {
        // As evanphx/json-patch (kube-apiserver): a missing last key (in an existing parent) equals null.
        if ((op.value ?? null) === null && missingLeaf(out, op.path)) break;
        const v = getAt(out, op.path);
        if (JSON.stringify(sortKeys(v)) !== JSON.stringify(sortKeys(op.value ?? null)))
          throw failed(`testing value ${op.path} failed: test operation failed`);
        break;
      }
    }
  }
  return out;
}

function missingLeaf(doc: Json, path: string): boolean {
  const tokens = pointer(path);
  if (tokens.length === 0) return false;
  const { parent, key } = parentOf(doc, tokens, path);
  return isObject(parent) && !Object.hasOwn(parent, key);
}

function sortKeys(v: Json): Json {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (isObject(v))
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, sortKeys(v[k])]),
    );
  return v;
}
