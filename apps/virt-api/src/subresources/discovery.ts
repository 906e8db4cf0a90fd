/**
 * Discovery documents for the aggregated group `subresources.kubevirt.io` (versions v1 and v1alpha3), as
 * kube-apiserver fetches them from an APIService backend: `/apis` (APIGroupList), `/apis/<group>` (APIGroup) and
 * `/apis/<group>/<version>` (APIResourceList). Every resource is a subresource, so `kubectl api-resources` lists
 * the group without rows, exactly as on a KubeVirt cluster.
 */

/** The aggregated group. */
export const SUBRESOURCE_GROUP = "subresources.kubevirt.io";
/** Served versions, preferred first. */
export const SUBRESOURCE_VERSIONS = ["v1", "v1alpha3"] as const;

/** The subresources this virt-api serves, as discovery names them. */
export const SUBRESOURCE_NAMES = [
  "virtualmachineinstances/console",
  "virtualmachineinstances/pause",
  "virtualmachineinstances/unpause",
  "virtualmachineinstances/softreboot",
  "virtualmachineinstances/guestosinfo",
  "virtualmachineinstances/portforward",
  "virtualmachines/start",
  "virtualmachines/stop",
  "virtualmachines/restart",
  "virtualmachines/migrate",
  "virtualmachines/expand-spec",
  "virtualmachines/portforward",
  "expand-vm-spec",
] as const;

function groupVersion(version: string): { groupVersion: string; version: string } {
  return { groupVersion: `${SUBRESOURCE_GROUP}/${version}`, version };
}

/** `/apis/subresources.kubevirt.io` */
export function apiGroup(): Record<string, unknown> {
  return {
    kind: "APIGroup",
    apiVersion: "v1",
    name: SUBRESOURCE_GROUP,
    versions: SUBRESOURCE_VERSIONS.map(groupVersion),
    preferredVersion: groupVersion(SUBRESOURCE_VERSIONS[0]),
  };
}

/** `/apis` */
export function apiGroupList(): Record<string, unknown> {
  const { kind: _kind, apiVersion: _apiVersion, ...group } = apiGroup();
  return { kind: "APIGroupList", apiVersion: "v1", groups: [group] };
}

/** `/apis/subresources.kubevirt.io/<version>` */
export function apiResourceList(version: string): Record<string, unknown> {
  return {
    kind: "APIResourceList",
    apiVersion: "v1",
    groupVersion: `${SUBRESOURCE_GROUP}/${version}`,
    resources: SUBRESOURCE_NAMES.map((name) => ({
      name,
      singularName: "",
      namespaced: true,
      kind: "",
      verbs: /\/(console|guestosinfo|portforward)$/.test(name) ? ["get"] : ["update"],
    })),
  };
}

/** The `version` subresource body (KubeVirt `version.Info`). */
export function versionInfo(gitVersion: string, runtime: string): Record<string, string> {
  return {
    gitVersion,
    gitCommit: "",
    gitTreeState: "clean",
    buildDate: "1970-01-01T00:00:00Z",
    goVersion: runtime,
    compiler: "tsc",
    platform: `${process.platform}/${process.arch === "x64" ? "amd64" : process.arch}`,
  };
}
