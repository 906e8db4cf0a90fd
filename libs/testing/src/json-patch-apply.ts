/**
 * Applies RFC 6902 JSON patches (through the `rfc6902` library) and RFC 7386 merge patches to plain objects, as the
 * API server does, for the fake cluster. A patch is atomic: any failed operation (a `test` that does not hold, a
 * missing path) throws and leaves the document untouched (the server answers 422).
 */
import type { JsonPatchOp } from "@kvt/kube";
import { applyPatch, type Operation } from "rfc6902";

/** Returns a patched copy of `doc`; throws an Error naming the first failing operation and its path. */
export function applyJsonPatch<T>(doc: T, ops: readonly JsonPatchOp[]): T {
  // rfc6902 mutates in place and reports one result per operation (it goes on after a failure): patch a copy.
  const copy = structuredClone(doc);
  const results = applyPatch(copy, ops as Operation[]);
  const failed = results.findIndex((r) => r !== null);
  if (failed >= 0) {
    const op = ops[failed];
    const verb = op.op === "test" ? "test failed" : `${op.op} failed`;
    throw new Error(`${verb} at ${op.path}`, { cause: results[failed] });
  }
  return copy;
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
