/**
 * A strategic merge patch for built-in kinds (k8s.io/apimachinery strategicpatch), driven by the patch merge keys
 * of the fields the system uses: lists of objects merge by key (containers/volumes/env by `name`, ports by
 * `containerPort`, conditions by `type`, ...); other lists are replaced. Directives: `$patch: replace|delete|merge`,
 * `$deleteFromPrimitiveList/<f>`, `$setElementOrder/<f>` and `$retainKeys` (order/retention hints, honoured for
 * deletion only where it matters).
 */
import { isObject, type Json, type JsonObject } from "../types.ts";

/** Patch merge keys by field name (the list fields of core/apps types that merge rather than replace). */
const MERGE_KEYS: Readonly<Record<string, string>> = {
  containers: "name",
  initContainers: "name",
  ephemeralContainers: "name",
  volumes: "name",
  env: "name",
  volumeMounts: "mountPath",
  volumeDevices: "devicePath",
  ports: "containerPort",
  conditions: "type",
  imagePullSecrets: "name",
  hostAliases: "ip",
  tolerations: "key",
  topologySpreadConstraints: "topologyKey",
  containerStatuses: "name",
  initContainerStatuses: "name",
  addresses: "type",
  taints: "key",
  ownerReferences: "uid",
  finalizers: "",
  subsets: "",
};

/** Merged as sets (primitive lists with merge semantics). */
const SET_LISTS: ReadonlySet<string> = new Set(["finalizers"]);

function mergeList(field: string, target: Json[], patch: Json[]): Json[] {
  const key = MERGE_KEYS[field];
  if (SET_LISTS.has(field)) {
    const out = [...target];
    for (const v of patch) if (!out.some((x) => JSON.stringify(x) === JSON.stringify(v))) out.push(v);
    return out;
  }
  if (!key) return structuredClone(patch);
  if (patch.some((p) => isObject(p) && p.$patch === "replace"))
    return patch.filter((p) => !(isObject(p) && p.$patch === "replace"));
  const out: Json[] = structuredClone(target);
  for (const p of patch) {
    if (!isObject(p)) {
      out.push(p);
      continue;
    }
    const idx = out.findIndex((t) => isObject(t) && JSON.stringify(t[key]) === JSON.stringify(p[key]));
    if (p.$patch === "delete") {
      if (idx >= 0) out.splice(idx, 1);
      continue;
    }
    if (idx >= 0) out[idx] = strategicMerge(out[idx], p);
    else out.push(strategicMerge({}, p));
  }
  return out;
}

/** Applies a strategic merge patch to `target` (inputs not modified). */
export function strategicMerge(target: Json | undefined, patch: Json): Json {
  if (!isObject(patch)) return structuredClone(patch);
  if (patch.$patch === "replace") {
    const { $patch: _, ...rest } = patch;
    return structuredClone(rest);
  }
  if (patch.$patch === "delete") return {};
  const out: JsonObject = isObject(target) ? { ...target } : {};
  const retain = Array.isArray(patch.$retainKeys) ? new Set(patch.$retainKeys.map(String)) : undefined;
  for (const [k, v] of Object.entries(patch)) {
    if (k === "$patch" || k === "$retainKeys" || k.startsWith("$setElementOrder/")) continue;
    if (k.startsWith("$deleteFromPrimitiveList/")) {
      const f = k.slice("$deleteFromPrimitiveList/".length);
      const cur = out[f];
      if (Array.isArray(cur) && Array.isArray(v))
        out[f] = cur.filter((x) => !v.some((d) => JSON.stringify(d) === JSON.stringify(x)));
      continue;
    }
    if (v === null) delete out[k];
    else if (Array.isArray(v) && Array.isArray(out[k])) out[k] = mergeList(k, out[k], v);
    else if (Array.isArray(v)) out[k] = mergeList(k, [], v);
    else out[k] = strategicMerge(out[k], v);
  }
  if (retain) for (const k of Object.keys(out)) if (!retain.has(k) && !Object.hasOwn(patch, k)) delete out[k];
  return out;
}
