/**
 * kube-controller-manager's root-ca-cert-publisher: every namespace holds the ConfigMap `kube-root-ca.crt` with the
 * cluster's CA certificate under `ca.crt` (the projected service account volume reads it). The ConfigMap is created
 * in each new namespace and put back when it is deleted or its data edited; a namespace being deleted is skipped.
 */
import type { Logger } from "pino";
import { ApiError } from "../errors.ts";
import { type ResourceService, systemContext } from "../rest/service.ts";
import type { StoreEvent } from "../storage/store.ts";
import { WorkLoop } from "./queue.ts";

/** The ConfigMap's name in every namespace. */
export const ROOT_CA_CONFIG_MAP = "kube-root-ca.crt";

const ctx = systemContext("system:serviceaccount:kube-system:root-ca-cert-publisher");

/** The publisher. */
export class RootCaPublisher {
  readonly #svc: ResourceService;
  readonly #caCert: string;
  readonly #loop: WorkLoop;

  constructor(svc: ResourceService, caCert: string, logger: Logger) {
    this.#svc = svc;
    this.#caCert = caCert;
    this.#loop = new WorkLoop((ns) => this.#process(ns), logger.child({ controller: "root-ca-cert-publisher" }), 500);
    for (const e of svc.store.list("core/namespaces")) this.#loop.add(e.id);
  }

  /** Feeds one committed event: a namespace, or a change to a `kube-root-ca.crt` ConfigMap. */
  onEvent(ev: StoreEvent): void {
    if (ev.coll === "core/namespaces" && ev.type !== "DELETED") this.#loop.add(ev.id);
    else if (ev.coll === "core/configmaps" && ev.obj.metadata.name === ROOT_CA_CONFIG_MAP)
      this.#loop.add(ev.obj.metadata.namespace as string);
  }

  async #process(ns: string): Promise<boolean> {
    const namespace = this.#svc.store.get("core/namespaces", ns);
    if (!namespace || namespace.obj.metadata.deletionTimestamp) return false;
    const def = this.#svc.registry.lookup("", "v1", "configmaps");
    if (!def) return false;
    const current = this.#svc.store.get("core/configmaps", `${ns}/${ROOT_CA_CONFIG_MAP}`);
    const data = { "ca.crt": this.#caCert };
    try {
      if (!current) {
        await this.#svc.create(def, "v1", ns, { metadata: { name: ROOT_CA_CONFIG_MAP, namespace: ns }, data }, ctx);
      } else if ((current.obj as { data?: Record<string, string> }).data?.["ca.crt"] !== this.#caCert) {
        const next = { ...structuredClone(current.obj), data };
        await this.#svc.update(def, "v1", ns, ROOT_CA_CONFIG_MAP, next, ctx);
      }
    } catch (err) {
      // A race with another writer (exists, conflict) or a namespace that just began terminating: look again later.
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
