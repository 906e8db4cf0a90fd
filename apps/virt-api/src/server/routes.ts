/**
 * Request routing for virt-api: which handler serves a method + path. Pure, so it is tested by table.
 *
 *   POST /<webhook path>                                                        -> webhook
 *   GET  /healthz | /apis/subresources.kubevirt.io/<v>/healthz                  -> healthz
 *   GET  /apis | /apis/subresources.kubevirt.io | /apis/subresources.kubevirt.io/<v>  -> discovery
 *   GET  /apis/subresources.kubevirt.io/<v>/version                             -> version
 *   PUT  /apis/subresources.kubevirt.io/<v>/namespaces/<ns>/virtualmachines/<name>/<start|stop|restart|migrate>
 *   PUT  /apis/subresources.kubevirt.io/<v>/namespaces/<ns>/virtualmachineinstances/<name>/<pause|unpause|softreboot>
 *   GET  /apis/subresources.kubevirt.io/<v>/namespaces/<ns>/virtualmachineinstances/<name>/<guestosinfo|console>
 *   GET  /apis/subresources.kubevirt.io/<v>/namespaces/<ns>/<virtualmachineinstances|virtualmachines>/<name>/
 *        portforward/<port>[/<protocol>]                                      (WebSocket upgrade)
 *   GET  /apis/subresources.kubevirt.io/<v>/namespaces/<ns>/virtualmachines/<name>/expand-spec
 *   PUT  /apis/subresources.kubevirt.io/<v>/namespaces/<ns>/expand-vm-spec
 */
import { SUBRESOURCE_GROUP, SUBRESOURCE_VERSIONS } from "../subresources/discovery.ts";

/** A routed request. */
export type Route =
  | { kind: "webhook"; path: string }
  | { kind: "healthz" }
  | { kind: "discovery"; doc: "groupList" | "group" | "resourceList"; version?: string }
  | { kind: "version" }
  | { kind: "vm"; namespace: string; name: string; action: "start" | "stop" | "restart" | "migrate" }
  | {
      kind: "vmi";
      namespace: string;
      name: string;
      action: "pause" | "unpause" | "softreboot" | "guestosinfo" | "console";
    }
  | {
      kind: "portForward";
      /** `vmi`: the VMI of that name; `vm`: the VMI the VM runs. */
      resource: "vm" | "vmi";
      namespace: string;
      name: string;
      /** As given in the path (validated by the handler of the route, which answers a Status). */
      port: string;
      protocol?: string;
    }
  | { kind: "expandSpec"; namespace: string; name: string }
  | { kind: "expandVmSpec"; namespace: string }
  | { kind: "notFound" }
  | { kind: "methodNotAllowed" };

const VM_ACTIONS = ["start", "stop", "restart", "migrate"] as const;
const VMI_PUT = ["pause", "unpause", "softreboot"] as const;
const VMI_GET = ["guestosinfo", "console"] as const;

function decode(segment: string): string | undefined {
  try {
    const s = decodeURIComponent(segment);
    return /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(s) ? s : undefined;
  } catch {
    return undefined;
  }
}

/** `namespaces/<ns>/<plural>/<name>/portforward/<port>[/<protocol>]` of a VMI or a VM. */
function routePortForward(method: string, rest: readonly string[]): Route {
  const [, ns, plural, rawName, , port, protocol, ...more] = rest;
  const namespace = ns ? decode(ns) : undefined;
  const name = rawName ? decode(rawName) : undefined;
  if (plural !== "virtualmachineinstances" && plural !== "virtualmachines") return { kind: "notFound" };
  if (!namespace || !name || port === undefined || more.length > 0) return { kind: "notFound" };
  if (method !== "GET") return { kind: "methodNotAllowed" };
  const resource = plural === "virtualmachines" ? "vm" : "vmi";
  return { kind: "portForward", resource, namespace, name, port, ...(protocol !== undefined ? { protocol } : {}) };
}

function routeResource(method: string, rest: string[]): Route {
  const [nsKey, ns, plural, rawName, action, ...extra] = rest;
  const namespace = ns ? decode(ns) : undefined;
  if (nsKey === "namespaces" && namespace && plural === "expand-vm-spec" && rest.length === 3) {
    return method === "PUT" ? { kind: "expandVmSpec", namespace } : { kind: "methodNotAllowed" };
  }
  const name = rawName ? decode(rawName) : undefined;
  if (nsKey !== "namespaces" || !namespace || !name || !action || extra.length > 0) return { kind: "notFound" };
  if (plural === "virtualmachines" && (VM_ACTIONS as readonly string[]).includes(action)) {
    if (method !== "PUT") return { kind: "methodNotAllowed" };
    return { kind: "vm", namespace, name, action: action as (typeof VM_ACTIONS)[number] };
  }
  if (plural === "virtualmachines" && action === "expand-spec") {
    return method === "GET" ? { kind: "expandSpec", namespace, name } : { kind: "methodNotAllowed" };
  }
  if (plural === "virtualmachineinstances" && (VMI_PUT as readonly string[]).includes(action)) {
    if (method !== "PUT") return { kind: "methodNotAllowed" };
    return { kind: "vmi", namespace, name, action: action as (typeof VMI_PUT)[number] };
  }
  if (plural === "virtualmachineinstances" && (VMI_GET as readonly string[]).includes(action)) {
    if (method !== "GET") return { kind: "methodNotAllowed" };
    return { kind: "vmi", namespace, name, action: action as (typeof VMI_GET)[number] };
  }
  return { kind: "notFound" };
}

/** Routes `method` + `pathname` (no query). `webhookPaths` are the served webhook paths. */
export function route(method: string, pathname: string, webhookPaths: ReadonlySet<string>): Route {
  if (webhookPaths.has(pathname))
    return method === "POST" ? { kind: "webhook", path: pathname } : { kind: "methodNotAllowed" };
  const parts = pathname.split("/").filter((p) => p.length > 0);
  if (parts.length === 1 && parts[0] === "healthz") return { kind: "healthz" };
  if (parts[0] !== "apis") return { kind: "notFound" };
  if (parts.length === 1)
    return method === "GET" ? { kind: "discovery", doc: "groupList" } : { kind: "methodNotAllowed" };
  if (parts[1] !== SUBRESOURCE_GROUP) return { kind: "notFound" };
  if (parts.length === 2) return method === "GET" ? { kind: "discovery", doc: "group" } : { kind: "methodNotAllowed" };
  const version = parts[2] ?? "";
  if (!(SUBRESOURCE_VERSIONS as readonly string[]).includes(version)) return { kind: "notFound" };
  const rest = parts.slice(3);
  if (rest.length === 0)
    return method === "GET" ? { kind: "discovery", doc: "resourceList", version } : { kind: "methodNotAllowed" };
  if (rest.length === 1 && (rest[0] === "version" || rest[0] === "healthz")) {
    if (method !== "GET") return { kind: "methodNotAllowed" };
    return rest[0] === "version" ? { kind: "version" } : { kind: "healthz" };
  }
  if (rest[0] === "namespaces" && rest[4] === "portforward") return routePortForward(method, rest);
  return routeResource(method, rest);
}
