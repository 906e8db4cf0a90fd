/**
 * Applies RFC 6902 JSON patches and RFC 7386 merge patches to plain objects, as the API server does, for the fake
 * client. A failed `test` throws (the server answers 422).
 */
import { deepEqual, type JsonPatchOp } from "@kvt/kube";

function unescapePointer(s: string): string {
  return s.replaceAll("~1", "/").replaceAll("~0", "~");
}

/** Returns a patched copy of `doc`; throws an Error naming the failing operation. */
export function applyJsonPatch<T>(doc: T, ops: readonly JsonPatchOp[]): T {
  const root = { v: structuredClone(doc) as unknown };
  for (const op of ops) {
    const segs = op.path.split("/").slice(1).map(unescapePointer);
    let parent: Record<string, unknown> = root;
    let key = "v";
    for (const seg of segs) {
      const next = parent[key];
      if (typeof next !== "object" || next === null) {
        if (op.op === "test" || op.op === "remove" || op.op === "replace") throw new Error(`path ${op.path} not found`);
        throw new Error(`parent of ${op.path} not found`);
      }
      parent = next as Record<string, unknown>;
      key = seg;
    }
    const exists = Array.isArray(parent) ? Number(key) < parent.length || key === "-" : key in parent;
    switch (op.op) {
      case "test":
        if (!exists || !deepEqual(parent[key], op.value)) throw new Error(`test failed at ${op.path}`);
        break;
      case "remove":
        if (!exists) throw new Error(`path ${op.path} not found`);
        if (Array.isArray(parent)) parent.splice(Number(key), 1);
        else delete parent[key];
        break;
      case "replace":
        if (!exists) throw new Error(`path ${op.path} not found`);
        parent[key] = structuredClone(op.value);
        break;
      case "add":
        if (Array.isArray(parent)) {
          if (key === "-") parent.push(structuredClone(op.value));
          else parent.splice(Number(key), 0, structuredClone(op.value));
        } else parent[key] = structuredClone(op.value);
        break;
    }
  }
  return root.v as T;
}

/** RFC 7386: objects merge recursively, `null` deletes, everything else replaces. */
export function applyMergePatch<T>(doc: T, patch: unknown): T {
  if (typeof patch !== "object" || patch === null || Array.isArray(patch)) return structuredClone(patch) as T;
  const out: Record<string, unknown> =
    typeof doc === "object" && doc !== null && !Array.isArray(doc) ? { ...(doc as Record<string, unknown>) } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = applyMergePatch(out[k], v);
  }
  return out as T;
}
