/**
 * Legacy discovery (an aggregated backend's APIResourceList) converted to aggregated discovery v2 resources, as
 * kube-apiserver does for APIService backends that serve only the legacy form (apiserver
 * `ConvertGroupVersionIntoToDiscovery`): top-level resources keep their fields; `parent/sub` entries become
 * subresources of their parent; a subresource whose parent is not listed gets a parent with an empty responseKind
 * (so `kubectl api-resources` shows `virtualmachines  subresources.kubevirt.io/v1  true` rows with no kind).
 */
import { isObject, type Json, type JsonObject } from "../types.ts";

const str = (v: Json | undefined): string => (typeof v === "string" ? v : "");
const strs = (v: Json | undefined): string[] =>
  Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : [];

/** The aggregated v2 `resources` of one group-version from its legacy APIResourceList `resources`. */
export function toAggregatedResources(group: string, version: string, legacy: readonly Json[]): Json[] {
  const out: JsonObject[] = [];
  const parents = new Map<string, JsonObject>();
  const scopeOf = (r: JsonObject): string => (r.namespaced === true ? "Namespaced" : "Cluster");
  for (const r of legacy) {
    if (!isObject(r) || str(r.name) === "" || str(r.name).includes("/")) continue;
    const d: JsonObject = {
      resource: str(r.name),
      responseKind: { group: str(r.group) || group, version: str(r.version) || version, kind: str(r.kind) },
      scope: scopeOf(r),
      singularResource: str(r.singularName),
      verbs: strs(r.verbs),
    };
    if (strs(r.shortNames).length) d.shortNames = strs(r.shortNames);
    if (strs(r.categories).length) d.categories = strs(r.categories);
    out.push(d);
    parents.set(str(r.name), d);
  }
  for (const r of legacy) {
    if (!isObject(r)) continue;
    const [parent, sub] = str(r.name).split("/", 2) as [string, string | undefined];
    if (!sub) continue;
    let p = parents.get(parent);
    if (!p) {
      p = { resource: parent, responseKind: { group: "", version: "", kind: "" }, scope: scopeOf(r), verbs: [] };
      out.push(p);
      parents.set(parent, p);
    }
    const kind = str(r.kind);
    const subs: Json[] = Array.isArray(p.subresources) ? p.subresources : [];
    subs.push({
      subresource: sub,
      responseKind: kind
        ? { group: str(r.group) || group, version: str(r.version) || version, kind }
        : { group: "", version: "", kind: "" },
      verbs: strs(r.verbs),
    });
    p.subresources = subs;
  }
  return out;
}

/** Legacy `/apis/<group>` (APIGroup) for an aggregated group, versions as registered (preferred first). */
export function legacyAggregatedGroup(
  aggregated: readonly { readonly group: string; readonly versions: readonly string[] }[],
  group: string,
): Json | undefined {
  const a = aggregated.find((x) => x.group === group);
  if (!a || a.versions.length === 0) return undefined;
  const versions = a.versions.map((v) => ({ groupVersion: `${group}/${v}`, version: v }));
  return { kind: "APIGroup", apiVersion: "v1", name: group, versions, preferredVersion: versions[0] ?? null };
}
