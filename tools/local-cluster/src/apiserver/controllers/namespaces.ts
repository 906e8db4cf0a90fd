/**
 * The namespace lifecycle controller: a namespace being deleted (phase Terminating) has all its contents deleted;
 * when nothing is left, its `kubernetes` finalizer is removed and the namespace goes away.
 */
import type { Logger } from "pino";
import { ApiError } from "../errors.ts";
import { collOf } from "../resources/types.ts";
import { deleteObject } from "../rest/delete.ts";
import { type ResourceService, systemContext } from "../rest/service.ts";
import type { StoreEvent } from "../storage/store.ts";
import { WorkLoop } from "./queue.ts";

const ctx = systemContext("system:serviceaccount:kube-system:namespace-controller");

/** The namespace controller. */
export class NamespaceController {
  readonly #svc: ResourceService;
  readonly #loop: WorkLoop;

  constructor(svc: ResourceService, logger: Logger) {
    this.#svc = svc;
    this.#loop = new WorkLoop((ns) => this.#process(ns), logger.child({ controller: "namespace" }), 500);
    for (const e of svc.store.list("core/namespaces")) if (e.obj.metadata.deletionTimestamp) this.#loop.add(e.id);
  }

  /** Feeds one committed event. */
  onEvent(ev: StoreEvent): void {
    if (ev.coll === "core/namespaces" && ev.type !== "DELETED" && ev.obj.metadata.deletionTimestamp)
      this.#loop.add(ev.id);
  }

  async #process(ns: string): Promise<boolean> {
    const entry = this.#svc.store.get("core/namespaces", ns);
    if (!entry?.obj.metadata.deletionTimestamp) return false;
    let remaining = 0;
    for (const def of this.#svc.registry.all()) {
      if (!def.namespaced) continue;
      for (const e of this.#svc.store.list(collOf(def), `${ns}/`)) {
        remaining++;
        if (e.obj.metadata.deletionTimestamp) continue;
        try {
          await deleteObject(
            this.#svc,
            def,
            ns,
            e.obj.metadata.name as string,
            { propagationPolicy: "Background" },
            ctx,
          );
        } catch (err) {
          if (!(err instanceof ApiError && err.code === 404)) throw err;
        }
      }
    }
    if (remaining > 0) return true;
    const cur = this.#svc.store.get("core/namespaces", ns);
    if (!cur) return false;
    const next = structuredClone(cur.obj);
    next.spec = { ...(next.spec ?? {}), finalizers: [] };
    if (next.metadata.finalizers?.length) {
      const { committed } = this.#svc.store.put("core/namespaces", ns, next);
      await committed;
      return false;
    }
    const { committed } = this.#svc.store.remove("core/namespaces", ns, next);
    await committed;
    return false;
  }

  /** Stops the loop. */
  stop(): void {
    this.#loop.stop();
  }
}
