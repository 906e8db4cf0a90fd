/**
 * kube-controller-manager's EndpointSlice controller (discovery.k8s.io/v1): every Service with a selector gets
 * EndpointSlices listing the pods it selects, kept up to date as pods and the Service change.
 *
 *   Service (selector, ports) + pods of its namespace
 *     --> pods that belong: labels match, an IP in status.podIP(s), phase neither Succeeded nor Failed
 *     --> per pod: ports resolved from each targetPort (a number, or a container port's name and protocol; a name
 *         the pod does not declare leaves that port out for this pod), and the endpoint
 *         { addresses: [podIP], conditions: { ready, serving, terminating }, nodeName, targetRef, hostname? }
 *         ready = Ready condition True and not terminating (or publishNotReadyAddresses), serving = Ready
 *     --> pods grouped by their resolved port list, at most {@link MAX_ENDPOINTS_PER_SLICE} per slice; a Service
 *         selecting nothing gets one empty placeholder slice
 *   slices: generateName `<service>-`, labels kubernetes.io/service-name, endpointslice.kubernetes.io/managed-by
 *   (and service.kubernetes.io/headless for clusterIP None) plus the Service's own labels, owned by the Service
 *   (controller: true), so the garbage collector removes them with it.
 *
 * Existing managed slices are reused (by port list first; updated only when they differ), extra ones deleted. Services
 * without a selector and ExternalName Services are left alone: their slices are the user's.
 */
import type { Logger } from "pino";
import { ApiError } from "../errors.ts";
import type { ResourceDef } from "../resources/types.ts";
import { deleteObject } from "../rest/delete.ts";
import { type ResourceService, systemContext } from "../rest/service.ts";
import type { StoreEvent } from "../storage/store.ts";
import { isObject, type KubeObject } from "../types.ts";
import { WorkLoop } from "./queue.ts";

/** The label naming a slice's Service. */
export const LABEL_SERVICE_NAME = "kubernetes.io/service-name";
/** The label naming who manages a slice. */
export const LABEL_MANAGED_BY = "endpointslice.kubernetes.io/managed-by";
/** kube-controller-manager's value of {@link LABEL_MANAGED_BY}. */
export const CONTROLLER_NAME = "endpointslice-controller.k8s.io";
/** Set on the slices of a headless Service. */
export const LABEL_HEADLESS = "service.kubernetes.io/headless";
/** kube-controller-manager's `--max-endpoints-per-slice` default. */
export const MAX_ENDPOINTS_PER_SLICE = 100;

const SERVICES = "core/services";
const PODS = "core/pods";
const SLICES = "discovery.k8s.io/endpointslices";
const ctx = systemContext("system:serviceaccount:kube-system:endpointslice-controller");

/** discovery.k8s.io/v1 EndpointPort. */
export interface EndpointPort {
  name: string;
  port: number;
  protocol: string;
  appProtocol?: string;
}

/** discovery.k8s.io/v1 Endpoint. */
export interface Endpoint {
  addresses: string[];
  conditions: { ready: boolean; serving: boolean; terminating: boolean };
  hostname?: string;
  nodeName?: string;
  targetRef: { kind: "Pod"; namespace: string; name: string; uid: string };
}

/** What a slice carries besides metadata. */
export interface SliceContent {
  addressType: "IPv4";
  endpoints: Endpoint[];
  ports: EndpointPort[];
}

type O = Record<string, unknown>;
const obj = (v: unknown): O => (isObject(v) ? v : {});
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

/** The selector of a Service the controller manages, or undefined (no selector, ExternalName). */
function managedSelector(svc: KubeObject): Record<string, string> | undefined {
  const spec = obj(svc.spec);
  if (spec.type === "ExternalName" || !isObject(spec.selector)) return undefined;
  return spec.selector as Record<string, string>;
}

function selects(selector: Record<string, string>, pod: KubeObject): boolean {
  const labels = pod.metadata.labels ?? {};
  return Object.entries(selector).every(([k, v]) => labels[k] === v);
}

function podIPv4(pod: KubeObject): string | undefined {
  const status = obj(pod.status);
  const ips = [status.podIP, ...arr(status.podIPs).map((p) => obj(p).ip)];
  return ips.find((ip): ip is string => typeof ip === "string" && ip !== "" && !ip.includes(":"));
}

function podReady(pod: KubeObject): boolean {
  return arr(obj(pod.status).conditions).some((c) => obj(c).type === "Ready" && obj(c).status === "True");
}

/** The container port a targetPort names on `pod` (kube's podutil.FindPort), or undefined. */
export function findPort(pod: KubeObject, targetPort: unknown, protocol: string): number | undefined {
  if (typeof targetPort === "number") return targetPort;
  if (typeof targetPort !== "string" || targetPort === "") return undefined;
  for (const c of arr(obj(pod.spec).containers))
    for (const p of arr(obj(c).ports)) {
      const q = obj(p);
      if (q.name === targetPort && (q.protocol ?? "TCP") === protocol && typeof q.containerPort === "number")
        return q.containerPort;
    }
  return undefined;
}

/** The Service's ports as this pod serves them (ports it cannot resolve are left out). */
function portsFor(svc: KubeObject, pod: KubeObject): EndpointPort[] {
  const out: EndpointPort[] = [];
  for (const p of arr(obj(svc.spec).ports)) {
    const q = obj(p);
    const protocol = typeof q.protocol === "string" ? q.protocol : "TCP";
    const port = findPort(pod, q.targetPort ?? q.port, protocol);
    if (port === undefined) continue;
    out.push({
      name: typeof q.name === "string" ? q.name : "",
      port,
      protocol,
      ...(typeof q.appProtocol === "string" ? { appProtocol: q.appProtocol } : {}),
    });
  }
  return out;
}

function endpointOf(svc: KubeObject, pod: KubeObject, ip: string): Endpoint {
  const terminating = pod.metadata.deletionTimestamp !== undefined;
  const ready = podReady(pod);
  const publish = obj(svc.spec).publishNotReadyAddresses === true;
  const spec = obj(pod.spec);
  const hostname =
    typeof spec.hostname === "string" && spec.subdomain === svc.metadata.name ? spec.hostname : undefined;
  return {
    addresses: [ip],
    conditions: { ready: publish || (ready && !terminating), serving: publish || ready, terminating },
    ...(hostname ? { hostname } : {}),
    ...(typeof spec.nodeName === "string" ? { nodeName: spec.nodeName } : {}),
    targetRef: {
      kind: "Pod",
      namespace: pod.metadata.namespace ?? "",
      name: pod.metadata.name ?? "",
      uid: pod.metadata.uid ?? "",
    },
  };
}

/**
 * The slices a Service should have (pure): one group per distinct resolved port list, ordered by it, endpoints
 * ordered by pod name, split every {@link MAX_ENDPOINTS_PER_SLICE}; one empty slice when no pod belongs; none for
 * a Service the controller does not manage.
 */
export function desiredEndpointSlices(svc: KubeObject, podsInNamespace: readonly KubeObject[]): SliceContent[] {
  const selected = selectedEndpoints(svc, podsInNamespace);
  if (!selected) return [];
  const groups = new Map<string, { ports: EndpointPort[]; endpoints: Endpoint[] }>();
  for (const { ports, endpoint } of selected) {
    const key = JSON.stringify(ports);
    const group = groups.get(key) ?? { ports, endpoints: [] };
    group.endpoints.push(endpoint);
    groups.set(key, group);
  }
  if (groups.size === 0) return [{ addressType: "IPv4", endpoints: [], ports: [] }];
  const out: SliceContent[] = [];
  for (const key of [...groups.keys()].sort()) {
    const { ports, endpoints } = groups.get(key)!;
    for (let i = 0; i < endpoints.length; i += MAX_ENDPOINTS_PER_SLICE)
      out.push({ addressType: "IPv4", endpoints: endpoints.slice(i, i + MAX_ENDPOINTS_PER_SLICE), ports });
  }
  return out;
}

/**
 * The pods a Service managed by the controllers selects, by name, each with its endpoint and resolved ports
 * (pure; shared with the Endpoints controller); undefined for a Service without a selector or of type ExternalName.
 */
export function selectedEndpoints(
  svc: KubeObject,
  podsInNamespace: readonly KubeObject[],
): { pod: KubeObject; ports: EndpointPort[]; endpoint: Endpoint }[] | undefined {
  const selector = managedSelector(svc);
  if (!selector) return undefined;
  const pods = [...podsInNamespace].sort((a, b) => (a.metadata.name ?? "").localeCompare(b.metadata.name ?? ""));
  const out: { pod: KubeObject; ports: EndpointPort[]; endpoint: Endpoint }[] = [];
  for (const pod of pods) {
    const phase = obj(pod.status).phase;
    const ip = podIPv4(pod);
    if (!ip || phase === "Succeeded" || phase === "Failed" || !selects(selector, pod)) continue;
    out.push({ pod, ports: portsFor(svc, pod), endpoint: endpointOf(svc, pod, ip) });
  }
  return out;
}

/** The labels of a Service's slices: its own labels, then the controller's. */
export function sliceLabels(svc: KubeObject): Record<string, string> {
  const labels: Record<string, string> = { ...(svc.metadata.labels ?? {}) };
  labels[LABEL_SERVICE_NAME] = svc.metadata.name ?? "";
  labels[LABEL_MANAGED_BY] = CONTROLLER_NAME;
  if (obj(svc.spec).clusterIP === "None") labels[LABEL_HEADLESS] = "";
  else delete labels[LABEL_HEADLESS];
  return labels;
}

const sameJson = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);

/** A stored slice's content, in {@link SliceContent}'s key order (for comparison). */
const pick = (s: KubeObject): SliceContent => ({
  addressType: s.addressType as SliceContent["addressType"],
  endpoints: s.endpoints as Endpoint[],
  ports: s.ports as EndpointPort[],
});

/** The controller over the server's store. */
export class EndpointSliceController {
  readonly #svc: ResourceService;
  readonly #loop: WorkLoop;

  constructor(svc: ResourceService, logger: Logger) {
    this.#svc = svc;
    this.#loop = new WorkLoop((key) => this.#sync(key), logger.child({ controller: "endpointslice" }), 1000);
    for (const e of svc.store.list(SERVICES)) this.#loop.add(e.id);
  }

  /** A Service, a pod (every Service of its namespace) or a managed slice (its Service) changed. */
  onEvent(ev: StoreEvent): void {
    if (ev.coll === SERVICES) this.#loop.add(ev.id);
    else if (ev.coll === PODS)
      for (const e of this.#svc.store.list(SERVICES, `${ev.obj.metadata.namespace ?? ""}/`)) this.#loop.add(e.id);
    else if (ev.coll === SLICES && ev.obj.metadata.labels?.[LABEL_MANAGED_BY] === CONTROLLER_NAME) {
      const name = ev.obj.metadata.labels[LABEL_SERVICE_NAME];
      if (name) this.#loop.add(`${ev.obj.metadata.namespace ?? ""}/${name}`);
    }
  }

  /** The managed slices of Service `ns/name` (owned by uid `uid` when given). */
  #slicesOf(ns: string, name: string, uid: string | undefined): KubeObject[] {
    return this.#svc.store
      .list(SLICES, `${ns}/`)
      .map((e) => e.obj)
      .filter(
        (s) =>
          s.metadata.labels?.[LABEL_MANAGED_BY] === CONTROLLER_NAME &&
          s.metadata.labels?.[LABEL_SERVICE_NAME] === name &&
          !s.metadata.deletionTimestamp &&
          (uid === undefined || (s.metadata.ownerReferences ?? []).some((r) => r.uid === uid)),
      );
  }

  async #sync(key: string): Promise<boolean> {
    const [ns = "", name = ""] = key.split("/");
    const svc = this.#svc.store.get(SERVICES, key)?.obj;
    // A deleted Service's slices go with it through the garbage collector (ownerReferences).
    if (!svc || svc.metadata.deletionTimestamp || !managedSelector(svc)) return false;
    const def = this.#svc.registry.lookup("discovery.k8s.io", "v1", "endpointslices");
    if (!def) return false;
    const pods = this.#svc.store.list(PODS, `${ns}/`).map((e) => e.obj);
    const have = this.#slicesOf(ns, name, svc.metadata.uid);
    // Slices of an earlier Service of this name (not owned by this one) go too.
    const stale = this.#slicesOf(ns, name, undefined).filter((s) => !have.includes(s));
    try {
      await this.#apply(def, svc, desiredEndpointSlices(svc, pods), have, stale);
    } catch (err) {
      // A race with another writer (conflict, gone) or a namespace being deleted: look again in a second.
      if (err instanceof ApiError && [403, 404, 409].includes(err.code)) return true;
      throw err;
    }
    return false;
  }

  /**
   * Writes `want` over the Service's slices `have`: a slice of the same ports is updated in place; a desired slice
   * without one takes over any other unused slice (kube's reconciler turns a create plus a delete into an update,
   * so a placeholder becomes the first real slice); the rest, and `stale`, are deleted.
   */
  async #apply(
    def: ResourceDef,
    svc: KubeObject,
    want: readonly SliceContent[],
    have: readonly KubeObject[],
    stale: readonly KubeObject[],
  ): Promise<void> {
    const ns = svc.metadata.namespace ?? "";
    const name = svc.metadata.name ?? "";
    const labels = sliceLabels(svc);
    const owner = { apiVersion: "v1", kind: "Service", name, uid: svc.metadata.uid ?? "" };
    const ownerReferences = [{ ...owner, controller: true, blockOwnerDeletion: true }];
    const unused = [...have];
    const matched = want.map((content) => {
      const i = unused.findIndex((s) => sameJson(s.ports, content.ports));
      return i >= 0 ? unused.splice(i, 1)[0] : undefined;
    });
    for (const [k, content] of want.entries()) {
      const reuse = matched[k] ?? unused.shift();
      if (!reuse) {
        const body = { metadata: { generateName: `${name}-`, namespace: ns, labels, ownerReferences }, ...content };
        await this.#svc.create(def, "v1", ns, body, ctx);
      } else if (!sameJson({ ...content, labels }, { ...pick(reuse), labels: reuse.metadata.labels })) {
        const next = { ...structuredClone(reuse), ...content };
        next.metadata.labels = labels;
        await this.#svc.update(def, "v1", ns, reuse.metadata.name ?? "", next, ctx);
      }
    }
    for (const s of [...unused, ...stale]) {
      const pre = { uid: s.metadata.uid };
      await deleteObject(this.#svc, def, ns, s.metadata.name ?? "", { preconditions: pre }, ctx);
    }
  }

  /** Stops the loop. */
  stop(): void {
    this.#loop.stop();
  }
}
