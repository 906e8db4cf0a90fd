/**
 * kube-controller-manager's Endpoints controller (core/v1 Endpoints, what `kubectl describe service` and
 * `kubectl get endpoints` show): one Endpoints object named after each Service with a selector, from the same pods
 * and ports the EndpointSlice controller picks (endpointslice.ts `selectedEndpoints`):
 *
 *   ready pod (or any, with publishNotReadyAddresses)   -> subsets[].addresses
 *   unready pod, not terminating                        -> subsets[].notReadyAddresses
 *   terminating pod                                      -> left out (unless publishNotReadyAddresses)
 *   subsets grouped by resolved port list (RepackSubsets), addresses by IP; none: no `subsets` field
 *   labels: the Service's, plus endpointslice.kubernetes.io/skip-mirror "true" (and service.kubernetes.io/headless)
 *
 * The Endpoints of a deleted Service go when the controller made them (they carry skip-mirror); Services without a
 * selector keep the Endpoints their users write.
 */
import type { Logger } from "pino";
import { ApiError } from "../errors.ts";
import { deleteObject } from "../rest/delete.ts";
import { type ResourceService, systemContext } from "../rest/service.ts";
import type { StoreEvent } from "../storage/store.ts";
import { isObject, type KubeObject } from "../types.ts";
import { type EndpointPort, LABEL_HEADLESS, selectedEndpoints } from "./endpointslice.ts";
import { WorkLoop } from "./queue.ts";

/** Set on the Endpoints this controller manages (the EndpointSlice mirroring controller skips them). */
export const LABEL_SKIP_MIRROR = "endpointslice.kubernetes.io/skip-mirror";

const SERVICES = "core/services";
const PODS = "core/pods";
const ENDPOINTS = "core/endpoints";
const ctx = systemContext("system:serviceaccount:kube-system:endpoint-controller");

/** core/v1 EndpointAddress. */
export interface EndpointAddress {
  ip: string;
  hostname?: string;
  nodeName?: string;
  targetRef: { kind: "Pod"; namespace: string; name: string; uid: string };
}

/** core/v1 EndpointSubset. */
export interface EndpointSubset {
  addresses?: EndpointAddress[];
  notReadyAddresses?: EndpointAddress[];
  ports?: EndpointPort[];
}

/** The subsets of a Service's Endpoints (pure); undefined for a Service the controller does not manage. */
export function desiredSubsets(svc: KubeObject, podsInNamespace: readonly KubeObject[]): EndpointSubset[] | undefined {
  const selected = selectedEndpoints(svc, podsInNamespace);
  if (!selected) return undefined;
  const publish = isObject(svc.spec) && svc.spec.publishNotReadyAddresses === true;
  const groups = new Map<string, { ports: EndpointPort[]; ready: EndpointAddress[]; notReady: EndpointAddress[] }>();
  for (const { ports, endpoint } of selected) {
    const { ready, terminating } = endpoint.conditions;
    if (terminating && !publish) continue;
    // Endpoints ports carry no empty name (kube's EndpointPort.Name is optional), unlike EndpointSlice's.
    const epPorts = ports.map((p) => (p.name === "" ? { port: p.port, protocol: p.protocol } : p)) as EndpointPort[];
    const key = JSON.stringify(epPorts);
    const group = groups.get(key) ?? { ports: epPorts, ready: [], notReady: [] };
    const address: EndpointAddress = {
      ip: endpoint.addresses[0] ?? "",
      ...(endpoint.hostname ? { hostname: endpoint.hostname } : {}),
      ...(endpoint.nodeName ? { nodeName: endpoint.nodeName } : {}),
      targetRef: endpoint.targetRef,
    };
    (ready ? group.ready : group.notReady).push(address);
    groups.set(key, group);
  }
  const byIp = (a: EndpointAddress, b: EndpointAddress): number => a.ip.localeCompare(b.ip, "en", { numeric: true });
  return [...groups.keys()].sort().map((key) => {
    const g = groups.get(key)!;
    return {
      ...(g.ready.length ? { addresses: g.ready.sort(byIp) } : {}),
      ...(g.notReady.length ? { notReadyAddresses: g.notReady.sort(byIp) } : {}),
      ...(g.ports.length ? { ports: g.ports } : {}),
    };
  });
}

/** The labels of a Service's Endpoints. */
export function endpointsLabels(svc: KubeObject): Record<string, string> {
  const labels: Record<string, string> = { ...(svc.metadata.labels ?? {}) };
  labels[LABEL_SKIP_MIRROR] = "true";
  if (isObject(svc.spec) && svc.spec.clusterIP === "None") labels[LABEL_HEADLESS] = "";
  else delete labels[LABEL_HEADLESS];
  return labels;
}

const sameJson = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);

/** The controller over the server's store. */
export class EndpointsController {
  readonly #svc: ResourceService;
  readonly #loop: WorkLoop;

  constructor(svc: ResourceService, logger: Logger) {
    this.#svc = svc;
    this.#loop = new WorkLoop((key) => this.#sync(key), logger.child({ controller: "endpoints" }), 1000);
    for (const e of svc.store.list(SERVICES)) this.#loop.add(e.id);
  }

  /** A Service, a pod (every Service of its namespace) or an Endpoints object changed. */
  onEvent(ev: StoreEvent): void {
    if (ev.coll === SERVICES || ev.coll === ENDPOINTS) this.#loop.add(ev.id);
    else if (ev.coll === PODS)
      for (const e of this.#svc.store.list(SERVICES, `${ev.obj.metadata.namespace ?? ""}/`)) this.#loop.add(e.id);
  }

  async #sync(key: string): Promise<boolean> {
    const [ns = "", name = ""] = key.split("/");
    const def = this.#svc.registry.lookup("", "v1", "endpoints");
    if (!def) return false;
    const svc = this.#svc.store.get(SERVICES, key)?.obj;
    const current = this.#svc.store.get(ENDPOINTS, key)?.obj;
    try {
      if (!svc) {
        if (current?.metadata.labels?.[LABEL_SKIP_MIRROR] === "true")
          await deleteObject(this.#svc, def, ns, name, { preconditions: { uid: current.metadata.uid } }, ctx);
        return false;
      }
      if (svc.metadata.deletionTimestamp) return false;
      const subsets = desiredSubsets(
        svc,
        this.#svc.store.list(PODS, `${ns}/`).map((e) => e.obj),
      );
      if (!subsets) return false;
      const labels = endpointsLabels(svc);
      const body = { metadata: { name, namespace: ns, labels }, ...(subsets.length ? { subsets } : {}) };
      if (!current) await this.#svc.create(def, "v1", ns, body, ctx);
      else if (!sameJson(current.subsets, body.subsets) || !sameJson(current.metadata.labels, labels)) {
        const next: KubeObject = { ...structuredClone(current), metadata: { ...current.metadata, labels } };
        if (subsets.length) next.subsets = subsets;
        else delete next.subsets;
        await this.#svc.update(def, "v1", ns, name, next, ctx);
      }
    } catch (err) {
      // A race with another writer (exists, conflict, gone) or a namespace being deleted: look again in a second.
      if (err instanceof ApiError && [403, 404, 409].includes(err.code)) return true;
      throw err;
    }
    return false;
  }

  /** Stops the loop. */
  stop(): void {
    this.#loop.stop();
  }
}
