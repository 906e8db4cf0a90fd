/** RFC 7386 JSON merge patch: objects merge recursively, `null` deletes a key, anything else replaces. */
import { isObject, type Json } from "../types.ts";

/** Applies `patch` to `target` and returns the result (inputs are not modified). */
export function mergePatch(target: Json | undefined, patch: Json): Json {
  if (!isObject(patch)) return structuredClone(patch);
  const out: { [k: string]: Json } = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}
