/**
 * kube-controller-manager's disruption controller, for policy/v1 PodDisruptionBudgets: each budget's status is
 * computed from the pods its selector picks, and written when it changed:
 *
 *   pods (namespace, selector) --> expectedPods   minAvailable N: the pods found; otherwise the scale of their
 *                                                 controllers (Deployment through its ReplicaSet, StatefulSet, ...)
 *                              --> desiredHealthy minAvailable (N or % of expected, rounded up), or expected -
 *                                                 maxUnavailable (N or %, rounded up)
 *                              --> currentHealthy Ready, not terminating, not recently evicted (disruptedPods)
 *   disruptionsAllowed = max(0, currentHealthy - desiredHealthy); condition DisruptionAllowed
 *   (SufficientPods / InsufficientPods / SyncFailed); observedGeneration = generation
 *
 * An eviction records its pod under status.disruptedPods (eviction.ts); the entry is dropped once the pod is gone or
 * terminating, or after {@link DELETION_TIMEOUT_MS} (the eviction never happened), as the real controller does.
 */
import type { Logger } from "pino";
import type { ResourceService } from "../rest/service.ts";
import { fromLabelSelectorObject, matchLabels } from "../selectors/labels.ts";
import type { StoreEvent } from "../storage/store.ts";
import { isObject, type KubeObject } from "../types.ts";
import { WorkLoop } from "./queue.ts";

/** How long an eviction recorded in disruptedPods waits for its pod to go (kube's DeletionTimeout, 2 min). */
export const DELETION_TIMEOUT_MS = 120_000;

const PDBS = "policy/poddisruptionbudgets";

/** A budget's computed status (policy/v1 PodDisruptionBudgetStatus). */
export interface DisruptionStatus {
  observedGeneration: number;
  disruptedPods?: Record<string, string>;
  disruptionsAllowed: number;
  currentHealthy: number;
  desiredHealthy: number;
  expectedPods: number;
  conditions: { type: string; status: string; reason: string; message: string; lastTransitionTime: string }[];
}

/**
 * What {@link computeBudgetStatus} reads besides the budget and its pods: the replicas wanted by the controller
 * `ref` of a pod in `namespace`, or undefined when it cannot be found.
 */
export type ScaleLookup = (
  namespace: string,
  ref: { kind: string; name: string; apiVersion?: string },
) => number | undefined;

type IntOrPercent = number | string | undefined;

function resolve(v: IntOrPercent, total: number): number | undefined {
  if (typeof v === "number") return v;
  if (typeof v !== "string") return undefined;
  const m = /^(\d+)%$/.exec(v);
  if (m) return Math.ceil((Number(m[1]) * total) / 100);
  return /^\d+$/.test(v) ? Number(v) : undefined;
}

function ready(pod: KubeObject): boolean {
  const conds = (pod.status as { conditions?: unknown[] } | undefined)?.conditions ?? [];
  return conds.some((c) => isObject(c) && c.type === "Ready" && c.status === "True");
}

function controllerOf(pod: KubeObject): { kind: string; name: string; apiVersion?: string } | undefined {
  return pod.metadata.ownerReferences?.find((r) => r.controller === true);
}

/** The expected pod count from the pods' controllers, or the reason it cannot be known. */
function expectedScale(pods: readonly KubeObject[], scaleOf: ScaleLookup): number | string {
  const seen = new Map<string, number>();
  for (const pod of pods) {
    const ref = controllerOf(pod);
    if (!ref) return `found no controller ref for pod "${pod.metadata.name ?? ""}"`;
    const key = `${ref.kind}/${ref.name}`;
    if (seen.has(key)) continue;
    const n = scaleOf(pod.metadata.namespace ?? "", ref);
    if (n === undefined) return `found no controllers for pod "${pod.metadata.name ?? ""}"`;
    seen.set(key, n);
  }
  return [...seen.values()].reduce((a, b) => a + b, 0);
}

function condition(
  prev: DisruptionStatus["conditions"] | undefined,
  status: "True" | "False",
  reason: string,
  message: string,
  now: string,
): DisruptionStatus["conditions"][number] {
  const old = prev?.find((c) => c.type === "DisruptionAllowed");
  const since = old && old.status === status ? old.lastTransitionTime : now;
  return { type: "DisruptionAllowed", status, reason, message, lastTransitionTime: since };
}

/** A budget's status from the pods in its namespace (pure; `now` in ms). */
export function computeBudgetStatus(
  pdb: KubeObject,
  podsInNamespace: readonly KubeObject[],
  scaleOf: ScaleLookup,
  now: number,
): DisruptionStatus {
  const spec = (pdb.spec ?? {}) as { selector?: unknown; minAvailable?: IntOrPercent; maxUnavailable?: IntOrPercent };
  const prev = (pdb.status ?? {}) as Partial<DisruptionStatus>;
  const stamp = new Date(now).toISOString().slice(0, 19) + "Z";
  const base = { observedGeneration: pdb.metadata.generation ?? 0 };
  let selector: ReturnType<typeof fromLabelSelectorObject> | undefined;
  try {
    selector = isObject(spec.selector) ? fromLabelSelectorObject(spec.selector) : undefined;
  } catch {
    // A selector that does not parse selects no pods (the budget then allows no disruption).
    selector = undefined;
  }
  const pods = selector ? podsInNamespace.filter((p) => matchLabels(selector, p.metadata.labels)) : [];
  const byName = new Map(pods.map((p) => [p.metadata.name ?? "", p]));
  const disrupted: Record<string, string> = {};
  for (const [name, at] of Object.entries(prev.disruptedPods ?? {})) {
    const pod = byName.get(name);
    if (pod && !pod.metadata.deletionTimestamp && Date.parse(at) + DELETION_TIMEOUT_MS > now) disrupted[name] = at;
  }
  const currentHealthy = pods.filter(
    (p) => !p.metadata.deletionTimestamp && ready(p) && disrupted[p.metadata.name ?? ""] === undefined,
  ).length;
  let expected: number | string;
  let desired: number;
  const minInt = typeof spec.minAvailable === "number" || /^\d+$/.test(String(spec.minAvailable ?? "x"));
  if (spec.minAvailable !== undefined && minInt) {
    expected = pods.length;
    desired = resolve(spec.minAvailable, 0) ?? 0;
  } else {
    expected = expectedScale(pods, scaleOf);
    const total = typeof expected === "number" ? expected : 0;
    desired =
      spec.maxUnavailable !== undefined
        ? Math.max(0, total - (resolve(spec.maxUnavailable, total) ?? 0))
        : (resolve(spec.minAvailable, total) ?? total);
  }
  const withDisrupted = Object.keys(disrupted).length > 0 ? { disruptedPods: disrupted } : {};
  if (typeof expected === "string")
    return {
      ...base,
      ...withDisrupted,
      disruptionsAllowed: 0,
      currentHealthy,
      desiredHealthy: 0,
      expectedPods: 0,
      conditions: [condition(prev.conditions, "False", "SyncFailed", expected, stamp)],
    };
  const allowed = expected <= 0 ? 0 : Math.max(0, currentHealthy - desired);
  return {
    ...base,
    ...withDisrupted,
    disruptionsAllowed: allowed,
    currentHealthy,
    desiredHealthy: desired,
    expectedPods: expected,
    conditions: [
      allowed > 0
        ? condition(prev.conditions, "True", "SufficientPods", "", stamp)
        : condition(prev.conditions, "False", "InsufficientPods", "", stamp),
    ],
  };
}

const SCALED: Record<string, string> = {
  ReplicaSet: "apps/replicasets",
  StatefulSet: "apps/statefulsets",
  ReplicationController: "core/replicationcontrollers",
  Deployment: "apps/deployments",
};

/** The disruption controller over the server's store. */
export class DisruptionController {
  readonly #svc: ResourceService;
  readonly #loop: WorkLoop;

  constructor(svc: ResourceService, logger: Logger) {
    this.#svc = svc;
    this.#loop = new WorkLoop((id) => this.#process(id), logger.child({ controller: "disruption" }), 1000);
    for (const e of svc.store.list(PDBS)) this.#loop.add(e.id);
  }

  /** A budget changed, or a pod of a namespace with budgets did. */
  onEvent(ev: StoreEvent): void {
    if (ev.coll === PDBS && ev.type !== "DELETED") this.#loop.add(ev.id);
    else if (ev.coll === "core/pods")
      for (const e of this.#svc.store.list(PDBS, `${ev.obj.metadata.namespace ?? ""}/`)) this.#loop.add(e.id);
  }

  #scaleOf: ScaleLookup = (ns, ref) => {
    const coll = SCALED[ref.kind];
    if (!coll) return undefined;
    const owner = this.#svc.store.get(coll, `${ns}/${ref.name}`)?.obj;
    if (!owner) return undefined;
    // A Deployment's pods belong to its ReplicaSets; the Deployment's scale is the one that counts.
    const parent = ref.kind === "ReplicaSet" ? controllerOf(owner) : undefined;
    if (parent?.kind === "Deployment") return this.#scaleOf(ns, parent);
    return (owner.spec as { replicas?: number } | undefined)?.replicas ?? 1;
  };

  /** Returns true (look again in a second) while evictions await their pods. */
  async #process(id: string): Promise<boolean> {
    const entry = this.#svc.store.get(PDBS, id);
    if (!entry || entry.obj.metadata.deletionTimestamp) return false;
    const pdb = entry.obj;
    const pods = this.#svc.store.list("core/pods", `${pdb.metadata.namespace ?? ""}/`).map((e) => e.obj);
    const next = computeBudgetStatus(pdb, pods, this.#scaleOf, Date.now());
    if (JSON.stringify(next) !== JSON.stringify(pdb.status ?? {})) {
      const { committed } = this.#svc.store.put(PDBS, id, { ...structuredClone(pdb), status: next });
      await committed;
    }
    return next.disruptedPods !== undefined;
  }

  /** Stops the loop. */
  stop(): void {
    this.#loop.stop();
  }
}
