/**
 * API discovery, both forms, computed from the registry (so it follows CRDs):
 *   aggregated (apidiscovery.k8s.io/v2 APIGroupDiscoveryList at /api and /apis, chosen by the Accept header and
 *   answered with that exact Content-Type, which is how client-go tells the forms apart), and legacy
 *   (APIVersions, APIGroupList, APIGroup, APIResourceList).
 */
import { toAggregatedResources } from "../extensions/discovery-convert.ts";
import type { ResourceRegistry } from "../resources/registry.ts";
import { groupVersion, type ResourceDef } from "../resources/types.ts";
import type { Json } from "../types.ts";

/** The Content-Type of aggregated discovery v2. */
export const AGGREGATED_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
const AGGREGATED_V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";

/** A group served by an extension (API aggregation), listed in discovery. */
export interface ExternalGroup {
  readonly group: string;
  readonly versions: readonly string[];
  /** Legacy APIResourceList resources, per version. */
  readonly resources: (version: string) => Json[];
}

/** Which discovery form the Accept header asks for. */
export function wantsAggregated(accept: string | undefined): "v2" | "v2beta1" | undefined {
  if (!accept) return undefined;
  const a = accept.replace(/\s/g, "");
  if (
    a.includes("g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList") ||
    a.includes("as=APIGroupDiscoveryList;v=v2;g=apidiscovery.k8s.io")
  )
    return "v2";
  if (a.includes("v=v2beta1") && a.includes("APIGroupDiscoveryList")) return "v2beta1";
  return undefined;
}

/** Content-Type for a negotiated aggregated form. */
export function aggregatedContentType(v: "v2" | "v2beta1"): string {
  return v === "v2" ? AGGREGATED_V2 : AGGREGATED_V2BETA1;
}

function groupsOf(registry: ResourceRegistry, core: boolean): Map<string, Map<string, ResourceDef[]>> {
  const groups = new Map<string, Map<string, ResourceDef[]>>();
  for (const d of registry.all()) {
    if ((d.group === "") !== core) continue;
    let g = groups.get(d.group);
    if (!g) {
      g = new Map();
      groups.set(d.group, g);
    }
    for (const v of d.versions) {
      const list = g.get(v) ?? [];
      list.push(d);
      g.set(v, list);
    }
  }
  return groups;
}

function sortVersions(g: Map<string, ResourceDef[]>): string[] {
  const preferred = new Map<string, number>();
  for (const defs of g.values())
    for (const d of defs) preferred.set(d.versions[0], (preferred.get(d.versions[0]) ?? 0) + 1);
  return [...g.keys()].sort((a, b) => (preferred.get(b) ?? 0) - (preferred.get(a) ?? 0));
}

function aggregatedResource(d: ResourceDef, version: string): Json {
  const kind = { group: d.group, version, kind: d.kind };
  const r: Record<string, Json> = {
    resource: d.resource,
    responseKind: kind,
    scope: d.namespaced ? "Namespaced" : "Cluster",
    singularResource: d.singular,
    verbs: [...d.verbs],
  };
  if (d.shortNames.length) r.shortNames = [...d.shortNames];
  if (d.categories.length) r.categories = [...d.categories];
  if (d.subresources.length)
    r.subresources = d.subresources.map((s) => ({
      subresource: s,
      responseKind:
        s === "status"
          ? kind
          : s === "binding"
            ? { group: "", version: "v1", kind: "Binding" }
            : s === "eviction"
              ? { group: "policy", version: "v1", kind: "Eviction" }
              : s === "token"
                ? { group: "authentication.k8s.io", version: "v1", kind: "TokenRequest" }
                : s === "scale"
                  ? { group: "autoscaling", version: "v1", kind: "Scale" }
                  : { group: "", version: "v1", kind: s === "log" ? "Pod" : d.kind },
      verbs:
        s === "status" || s === "scale"
          ? ["get", "patch", "update"]
          : s === "log"
            ? ["get"]
            : s === "finalize"
              ? ["update"]
              : ["create"],
    }));
  return r;
}

/** The aggregated APIGroupDiscoveryList for /api (core) or /apis. */
export function aggregatedDiscovery(
  registry: ResourceRegistry,
  core: boolean,
  apiVersion: "v2" | "v2beta1",
  external: readonly ExternalGroup[],
): Json {
  const items: Json[] = [];
  for (const [group, versions] of groupsOf(registry, core)) {
    items.push({
      metadata: core ? { creationTimestamp: null } : { name: group, creationTimestamp: null },
      versions: sortVersions(versions).map((v) => ({
        version: v,
        resources: (versions.get(v) ?? [])
          .sort((a, b) => a.resource.localeCompare(b.resource))
          .map((d) => aggregatedResource(d, v)),
        freshness: "Current",
      })),
    });
  }
  if (!core)
    for (const e of external)
      items.push({
        metadata: { name: e.group, creationTimestamp: null },
        versions: e.versions.map((v) => ({
          version: v,
          resources: toAggregatedResources(e.group, v, e.resources(v)),
          freshness: "Current",
        })),
      });
  return { kind: "APIGroupDiscoveryList", apiVersion: `apidiscovery.k8s.io/${apiVersion}`, metadata: {}, items };
}

/** Legacy `/api`. */
export function legacyApiVersions(host: string): Json {
  return {
    kind: "APIVersions",
    versions: ["v1"],
    serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress: host }],
  };
}

function apiGroup(group: string, versions: string[]): Json {
  const vs = versions.map((v) => ({ groupVersion: `${group}/${v}`, version: v }));
  return { name: group, versions: vs, preferredVersion: vs[0] ?? null };
}

/** Legacy `/apis`. */
export function legacyApiGroupList(registry: ResourceRegistry, external: readonly ExternalGroup[]): Json {
  const groups: Json[] = [];
  for (const [group, versions] of groupsOf(registry, false)) groups.push(apiGroup(group, sortVersions(versions)));
  for (const e of external) groups.push(apiGroup(e.group, [...e.versions]));
  return { kind: "APIGroupList", apiVersion: "v1", groups };
}

/** Legacy `/apis/<group>` (undefined if not served). */
export function legacyApiGroup(registry: ResourceRegistry, group: string): Json | undefined {
  const versions = groupsOf(registry, false).get(group);
  if (!versions) return undefined;
  return { kind: "APIGroup", apiVersion: "v1", ...(apiGroup(group, sortVersions(versions)) as object) };
}

/** Legacy `/api/v1` or `/apis/<group>/<version>` (undefined if not served). */
export function legacyResourceList(registry: ResourceRegistry, group: string, version: string): Json | undefined {
  const defs = registry.all().filter((d) => d.group === group && d.versions.includes(version));
  if (defs.length === 0) return undefined;
  const resources: Json[] = [];
  for (const d of defs) {
    const r: Record<string, Json> = {
      name: d.resource,
      singularName: d.singular,
      namespaced: d.namespaced,
      kind: d.kind,
      verbs: [...d.verbs],
    };
    if (d.shortNames.length) r.shortNames = [...d.shortNames];
    if (d.categories.length) r.categories = [...d.categories];
    resources.push(r);
    for (const s of d.subresources) {
      const sub = aggregatedResource(d, version) as {
        subresources: {
          subresource: string;
          verbs: string[];
          responseKind: { kind: string; group: string; version: string };
        }[];
      };
      const x = sub.subresources.find((y) => y.subresource === s);
      const item: Record<string, Json> = {
        name: `${d.resource}/${s}`,
        singularName: "",
        namespaced: d.namespaced,
        kind: x?.responseKind.kind ?? d.kind,
        verbs: x?.verbs ?? [],
      };
      if (x && x.responseKind.group !== d.group) {
        item.group = x.responseKind.group;
        item.version = x.responseKind.version;
      }
      resources.push(item);
    }
  }
  return { kind: "APIResourceList", apiVersion: "v1", groupVersion: groupVersion(group, version), resources };
}
