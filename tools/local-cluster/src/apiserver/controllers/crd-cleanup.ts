/**
 * CRD cleanup (apiextensions' finalizer controller): a CRD being deleted keeps its
 * `customresourcecleanup.apiextensions.k8s.io` finalizer until every custom resource of it is gone.
 */
import type { Logger } from "pino";
import { ApiError } from "../errors.ts";
import type { CrdSpec } from "../resources/crd.ts";
import { deleteObject } from "../rest/delete.ts";
import { type ResourceService, systemContext } from "../rest/service.ts";
import type { StoreEvent } from "../storage/store.ts";
import { WorkLoop } from "./queue.ts";

/** The finalizer every CRD carries. */
export const CRD_CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io";
const COLL = "apiextensions.k8s.io/customresourcedefinitions";
const ctx = systemContext("system:serviceaccount:kube-system:apiextensions");

/** The CRD cleanup controller. */
export class CrdCleanupController {
  readonly #svc: ResourceService;
  readonly #loop: WorkLoop;

  constructor(svc: ResourceService, logger: Logger) {
    this.#svc = svc;
    this.#loop = new WorkLoop((n) => this.#process(n), logger.child({ controller: "crd-cleanup" }), 500);
    for (const e of svc.store.list(COLL)) if (e.obj.metadata.deletionTimestamp) this.#loop.add(e.id);
  }

  /** Feeds one committed event. */
  onEvent(ev: StoreEvent): void {
    if (ev.coll === COLL && ev.type !== "DELETED" && ev.obj.metadata.deletionTimestamp) this.#loop.add(ev.id);
  }

  async #process(name: string): Promise<boolean> {
    const crd = this.#svc.store.get(COLL, name)?.obj;
    if (!crd?.metadata.deletionTimestamp || !crd.metadata.finalizers?.includes(CRD_CLEANUP_FINALIZER)) return false;
    const spec = crd.spec as CrdSpec;
    const coll = `${spec.group}/${spec.names.plural}`;
    const def = this.#svc.registry.byColl(coll);
    const items = this.#svc.store.list(coll);
    if (def && items.length > 0) {
      for (const e of items) {
        if (e.obj.metadata.deletionTimestamp) continue;
        try {
          await deleteObject(this.#svc, def, e.obj.metadata.namespace, e.obj.metadata.name as string, {}, ctx);
        } catch (err) {
          if (!(err instanceof ApiError && err.code === 404)) throw err;
        }
      }
      return true;
    }
    const crdDef = this.#svc.registry.byColl(COLL);
    if (!crdDef) return false;
    const next = structuredClone(crd);
    next.metadata.finalizers = (next.metadata.finalizers ?? []).filter((f) => f !== CRD_CLEANUP_FINALIZER);
    await this.#svc.update(crdDef, "v1", undefined, name, next, ctx);
    return false;
  }

  /** Stops the loop. */
  stop(): void {
    this.#loop.stop();
  }
}
