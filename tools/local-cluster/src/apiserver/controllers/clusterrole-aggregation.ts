/**
 * kube-controller-manager's clusterrole-aggregation controller: an aggregated ClusterRole (`aggregationRule`) keeps
 * in its `rules` the union of the rules of the ClusterRoles its selectors match, so `kubectl get clusterrole edit
 * -o yaml` and `kubectl describe` show what it grants. The authorizer computes the same union when it decides
 * (auth/rbac.ts aggregatedRules), so a grant takes effect with the write that labels a role, not after this loop.
 */
import type { Logger } from "pino";
import { aggregatedRules } from "../auth/rbac.ts";
import type { ResourceService } from "../rest/service.ts";
import type { StoreEvent } from "../storage/store.ts";
import { jsonEqual } from "../types.ts";
import { WorkLoop } from "./queue.ts";

const COLL = "rbac.authorization.k8s.io/clusterroles";

/** Keeps aggregated ClusterRoles' rules up to date. */
export class ClusterRoleAggregation {
  readonly #svc: ResourceService;
  readonly #loop: WorkLoop;

  constructor(svc: ResourceService, logger: Logger) {
    this.#svc = svc;
    this.#loop = new WorkLoop((id) => this.#process(id), logger.child({ controller: "clusterrole-aggregation" }));
    this.#enqueueAggregated();
  }

  /** Any ClusterRole changed: every aggregated one may select it (or have stopped selecting it). */
  onEvent(ev: StoreEvent): void {
    if (ev.coll === COLL) this.#enqueueAggregated();
  }

  #enqueueAggregated(): void {
    for (const e of this.#svc.store.list(COLL)) if (e.obj.aggregationRule) this.#loop.add(e.id);
  }

  async #process(id: string): Promise<boolean> {
    const role = this.#svc.store.get(COLL, id)?.obj;
    const rules = role ? aggregatedRules(this.#svc.store, role) : undefined;
    if (!role || !rules || jsonEqual(role.rules ?? [], rules)) return false;
    const { committed } = this.#svc.store.put(COLL, id, {
      ...structuredClone(role),
      rules: structuredClone(rules),
    });
    await committed;
    return false;
  }

  /** Stops the loop. */
  stop(): void {
    this.#loop.stop();
  }
}
