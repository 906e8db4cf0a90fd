/** URL paths virtctl calls: plain objects under kubevirt.io/v1 and core v1, actions under subresources.kubevirt.io/v1. */

const SUB = "/apis/subresources.kubevirt.io/v1";
const KV = "/apis/kubevirt.io/v1";

function seg(s: string): string {
  return encodeURIComponent(s);
}

/** `.../virtualmachines/<name>/<action>` on the aggregated group. */
export function vmSubresource(namespace: string, name: string, action: string): string {
  return `${SUB}/namespaces/${seg(namespace)}/virtualmachines/${seg(name)}/${action}`;
}

/** `.../virtualmachineinstances/<name>/<action>` on the aggregated group. */
export function vmiSubresource(namespace: string, name: string, action: string): string {
  return `${SUB}/namespaces/${seg(namespace)}/virtualmachineinstances/${seg(name)}/${action}`;
}

/** The aggregated group's `version`. */
export const SUBRESOURCE_VERSION_PATH = `${SUB}/version`;

/** A kubevirt.io/v1 object or collection: `kubevirtPath(ns, "virtualmachines", name?)`. */
export function kubevirtPath(namespace: string, plural: string, name?: string): string {
  const base = `${KV}/namespaces/${seg(namespace)}/${plural}`;
  return name === undefined ? base : `${base}/${seg(name)}`;
}

/** A core v1 collection or object: `corePath(ns, "services", name?)`. */
export function corePath(namespace: string, plural: string, name?: string): string {
  const base = `/api/v1/namespaces/${seg(namespace)}/${plural}`;
  return name === undefined ? base : `${base}/${seg(name)}`;
}
