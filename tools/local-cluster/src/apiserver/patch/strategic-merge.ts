/**
 * A strategic merge patch for built-in kinds (k8s.io/apimachinery strategicpatch), driven by the patch merge keys
 * of the fields the system uses: lists of objects merge by key (containers/volumes/env by `name`, ports by
 * `containerPort`, conditions by `type`, ...); other lists are replaced. Directives: `$patch: replace|delete|merge`,
 * `$deleteFromPrimitiveList/<f>`, `$setElementOrder/<f>` and `$retainKeys` (retention honoured for deletion only
 * where it matters).
 *
 * A merged list is ordered as apimachinery's normalizeElementOrder orders it: the entries the patch names (in the
 * patch's order, or `$setElementOrder/<f>`'s) and the entries only the server had (in their old order) are
 * interleaved by their old positions, a patch entry first where that order says nothing. kwok's pod-ready patch of
 * [Initialized, Ready, ContainersReady] onto [PodScheduled] therefore gives [Initialized, Ready, ContainersReady,
 * PodScheduled], as on kube-apiserver (found by the scale bench; this server had appended them).
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

/** The identity of a list entry: its merge key's value (objects) or itself (primitives), as JSON. */
function identity(item: Json, key: string): string {
  return JSON.stringify(key && isObject(item) ? item[key] : item);
}

/**
 * apimachinery's normalizeElementOrder: `patchItems` sorted by `patchOrder`, `serverOnly` by `serverOrder`, then
 * each server-only entry inserted before the first patch entry that `serverOrder` places after it.
 */
function normalizeOrder(
  patchItems: Json[],
  serverOnly: Json[],
  patchOrder: readonly Json[],
  serverOrder: readonly Json[],
  key: string,
): Json[] {
  const indexIn = (order: readonly Json[]) => {
    const ids = order.map((o) => identity(o, key));
    return (item: Json): number => ids.indexOf(identity(item, key));
  };
  const byOrder = (items: Json[], order: readonly Json[]): Json[] => {
    const at = indexIn(order);
    return items
      .map((item, i) => ({ item, i, at: at(item) }))
      .sort((a, b) => (a.at >= 0 && b.at >= 0 ? a.at - b.at : a.i - b.i))
      .map((x) => x.item);
  };
  const left = byOrder(serverOnly, serverOrder);
  const right = byOrder(patchItems, patchOrder);
  const server = indexIn(serverOrder);
  const out: Json[] = [];
  let i = 0;
  let j = 0;
  while (i < left.length || j < right.length) {
    if (j >= right.length) out.push(left[i++]);
    else if (i >= left.length) out.push(right[j++]);
    else {
      const li = server(left[i]);
      const ri = server(right[j]);
      out.push(li >= 0 && ri >= 0 && li < ri ? left[i++] : right[j++]);
    }
  }
  return out;
}

/** Splits `merged` into the entries `named` lists and the others, then orders them (see {@link normalizeOrder}). */
function orderMerged(merged: Json[], named: readonly Json[], serverOrder: readonly Json[], key: string): Json[] {
  const ids = new Set(named.map((n) => identity(n, key)));
  const patchItems = merged.filter((m) => ids.has(identity(m, key)));
  const serverOnly = merged.filter((m) => !ids.has(identity(m, key)));
  return normalizeOrder(patchItems, serverOnly, named, serverOrder, key);
}

function mergeList(field: string, target: Json[], patch: Json[]): Json[] {
  const key = MERGE_KEYS[field];
  if (SET_LISTS.has(field)) {
    const out = [...target];
    for (const v of patch) if (!out.some((x) => JSON.stringify(x) === JSON.stringify(v))) out.push(v);
    return orderMerged(out, patch, target, "");
  }
  if (!key) return structuredClone(patch);
  if (patch.some((p) => isObject(p) && p.$patch === "replace"))
    return patch.filter((p) => !(isObject(p) && p.$patch === "replace"));
  let out: Json[] = structuredClone(target);
  const entries: Json[] = [];
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
    entries.push(p);
    if (idx >= 0) out[idx] = strategicMerge(out[idx], p);
    else out.push(strategicMerge({}, p));
  }
  const server = out.filter((o) => target.some((t) => identity(t, key) === identity(o, key)));
  out = orderMerged(out, entries, server, key);
  return out;
}

/** `$setElementOrder/<f>` directives: the merged list `f` of `out` in that order (see {@link normalizeOrder}). */
function applyElementOrder(out: JsonObject, target: Json | undefined, patch: JsonObject): void {
  for (const [k, order] of Object.entries(patch)) {
    if (!k.startsWith("$setElementOrder/") || !Array.isArray(order)) continue;
    const f = k.slice("$setElementOrder/".length);
    const merged = out[f];
    const before = isObject(target) ? target[f] : undefined;
    if (Array.isArray(merged) && MERGE_KEYS[f] !== undefined) {
      out[f] = orderMerged(merged, order, Array.isArray(before) ? before : [], MERGE_KEYS[f]);
    }
  }
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
  applyElementOrder(out, target, patch);
  if (retain) for (const k of Object.keys(out)) if (!retain.has(k) && !Object.hasOwn(patch, k)) delete out[k];
  return out;
}
