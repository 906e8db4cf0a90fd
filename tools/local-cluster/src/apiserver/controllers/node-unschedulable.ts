/**
 * The node lifecycle controller's NoSchedule tainting for cordoned nodes (kube-controller-manager
 * `doNoScheduleTaintingPass`): a node with `spec.unschedulable: true` carries the taint
 * `node.kubernetes.io/unschedulable:NoSchedule`, and loses it when it is schedulable again (`kubectl uncordon`).
 * Other taints are left alone.
 */
import type { Logger } from "pino";
import type { ResourceService } from "../rest/service.ts";
import type { StoreEvent } from "../storage/store.ts";
import type { KubeObject } from "../types.ts";
import { WorkLoop } from "./queue.ts";

/** The taint key of a cordoned node (v1.TaintNodeUnschedulable). */
export const TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable";

interface Taint {
  key: string;
  value?: string;
  effect: string;
  timeAdded?: string;
}

/** The taints `node` should carry (pure): its own, with the unschedulable taint added or removed per its spec. */
export function desiredTaints(node: KubeObject): Taint[] {
  const spec = (node.spec ?? {}) as { unschedulable?: boolean; taints?: Taint[] };
  const others = (spec.taints ?? []).filter((t) => !(t.key === TAINT_NODE_UNSCHEDULABLE && t.effect === "NoSchedule"));
  return spec.unschedulable ? [...others, { key: TAINT_NODE_UNSCHEDULABLE, effect: "NoSchedule" }] : others;
}

/** Keeps the unschedulable taint in step with `spec.unschedulable`. */
export class NodeUnschedulableTaints {
  readonly #svc: ResourceService;
  readonly #loop: WorkLoop;

  constructor(svc: ResourceService, logger: Logger) {
    this.#svc = svc;
    this.#loop = new WorkLoop((id) => this.#process(id), logger.child({ controller: "node-lifecycle" }), 500);
    for (const e of svc.store.list("core/nodes")) this.#loop.add(e.id);
  }

  /** A node changed. */
  onEvent(ev: StoreEvent): void {
    if (ev.coll === "core/nodes" && ev.type !== "DELETED") this.#loop.add(ev.id);
  }

  async #process(id: string): Promise<boolean> {
    const node = this.#svc.store.get("core/nodes", id)?.obj;
    if (!node) return false;
    const spec = (node.spec ?? {}) as { taints?: Taint[] };
    const want = desiredTaints(node);
    const have = spec.taints ?? [];
    const same =
      want.length === have.length && want.every((t) => have.some((h) => h.key === t.key && h.effect === t.effect));
    if (same) return false;
    const next = structuredClone(node);
    const nextSpec = { ...(next.spec ?? {}) } as { taints?: Taint[] };
    if (want.length > 0) nextSpec.taints = want;
    else delete nextSpec.taints;
    next.spec = nextSpec;
    const { committed } = this.#svc.store.put("core/nodes", id, next);
    await committed;
    return false;
  }

  /** Stops the loop. */
  stop(): void {
    this.#loop.stop();
  }
}
