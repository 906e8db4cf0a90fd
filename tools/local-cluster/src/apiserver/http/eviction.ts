/**
 * POST pods/NAME/eviction (policy/v1 Eviction; policy/v1beta1 bodies are read the same way), as kube-apiserver's
 * eviction REST (pkg/registry/core/pod/storage/eviction.go):
 *
 *   body -> name check -> admission (CREATE pods/eviction, kind policy/v1 Eviction: mutating, then validating;
 *        virt-api's virt-launcher-eviction-interceptor answers here)
 *        -> pod terminal, Pending or being deleted?          -> delete (no budget consulted)
 *        -> PodDisruptionBudgets selecting the pod:  none     -> delete
 *                                                    two+     -> 500 (the subresource supports one)
 *                                                    one      -> checkDisruptionBudget(): 429 while the budget is
 *                                                                unprocessed or spent, else disruptionsAllowed-1 and
 *                                                                status.disruptedPods[pod] = now, then delete
 *        -> 201 Status Success
 *
 * The pod gets the condition DisruptionTarget (EvictionByEvictionAPI) and is deleted with the Eviction's
 * deleteOptions (its grace period, else the pod's), without a second round of DELETE admission (kube-apiserver
 * deletes through the store with ValidateAllObjectFunc). A dry run consults the budget and admission but writes
 * nothing.
 */
import { type ApiError, badRequest, forbidden, statusError } from "../errors.ts";
import type { ResourceDef } from "../resources/types.ts";
import { type DeleteOptions, deleteObject } from "../rest/delete.ts";
import { fromLabelSelectorObject, matchLabels } from "../selectors/labels.ts";
import { isObject, type KubeObject } from "../types.ts";
import { sendJson } from "./io.ts";
import { deleteOptions, type SubresourceContext } from "./resource-handler.ts";

/** kube-apiserver's cap on `status.disruptedPods` entries (MaxDisruptedPodSize). */
export const MAX_DISRUPTED_PODS = 2000;

/** The message of every 429 a budget answers (kube-apiserver's, verbatim). */
export const EVICTION_BUDGET_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget.";

/** The parts of a PodDisruptionBudget the eviction reads and writes. */
export interface BudgetStatus {
  observedGeneration?: number;
  disruptionsAllowed?: number;
  currentHealthy?: number;
  desiredHealthy?: number;
  expectedPods?: number;
  disruptedPods?: Record<string, string>;
  conditions?: unknown[];
}

function tooManyRequests(cause: string, retryAfterSeconds?: number): ApiError {
  return statusError(429, "TooManyRequests", EVICTION_BUDGET_MESSAGE, {
    causes: [{ reason: "DisruptionBudget", message: cause }],
    ...(retryAfterSeconds ? { retryAfterSeconds } : {}),
  });
}

/** kube-apiserver names the resource in the singular here (`policy.Resource("poddisruptionbudget")`). */
const PDB_RESOURCE = { group: "policy", resource: "poddisruptionbudget" };

/**
 * Decides one eviction against the pod's budget (pure; kube-apiserver's checkAndDecrement): throws the 429 or 403 it
 * answers, or returns the budget's next status (one disruption fewer, the pod recorded as disrupted at `now`).
 */
export function checkDisruptionBudget(pdb: KubeObject, podName: string, now: string): BudgetStatus {
  const status = (pdb.status ?? {}) as BudgetStatus;
  const name = pdb.metadata.name ?? "";
  if ((status.observedGeneration ?? 0) < (pdb.metadata.generation ?? 0))
    throw tooManyRequests(`The disruption budget ${name} is still being processed by the server.`, 10);
  const allowed = status.disruptionsAllowed ?? 0;
  if (allowed < 0) throw forbidden(PDB_RESOURCE, name, "pdb disruptions allowed is negative");
  if (Object.keys(status.disruptedPods ?? {}).length > MAX_DISRUPTED_PODS)
    throw forbidden(
      PDB_RESOURCE,
      name,
      "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
    );
  if (allowed === 0)
    throw tooManyRequests(
      `The disruption budget ${name} needs ${status.desiredHealthy ?? 0} healthy pods and has ${status.currentHealthy ?? 0} currently`,
    );
  const next: BudgetStatus = {
    ...status,
    disruptionsAllowed: allowed - 1,
    disruptedPods: { ...status.disruptedPods, [podName]: now },
  };
  // The last disruption spent: DisruptionAllowed turns False at once (pdbhelper.UpdateDisruptionAllowedCondition).
  if (allowed === 1) {
    const others = (status.conditions ?? []).filter((c) => !(isObject(c) && c.type === "DisruptionAllowed"));
    const cond = { type: "DisruptionAllowed", status: "False", reason: "InsufficientPods", message: "" };
    next.conditions = [...others, { ...cond, lastTransitionTime: now }];
  }
  return next;
}

/** True when the pod's Ready condition is True. */
export function podReady(pod: KubeObject): boolean {
  const conds = (pod.status as { conditions?: unknown[] } | undefined)?.conditions ?? [];
  return conds.some((c) => isObject(c) && c.type === "Ready" && c.status === "True");
}

/** Terminal, Pending and terminating pods are evicted without consulting a budget (kube-apiserver canIgnorePDB). */
function ignoresBudget(pod: KubeObject): boolean {
  const phase = (pod.status as { phase?: string } | undefined)?.phase;
  return phase === "Succeeded" || phase === "Failed" || phase === "Pending" || !!pod.metadata.deletionTimestamp;
}

/** An unready pod goes without using up the budget when its policy (or a healthy budget) allows it. */
function unhealthyMayGo(pdb: KubeObject, pod: KubeObject): boolean {
  if (podReady(pod)) return false;
  const policy = (pdb.spec as { unhealthyPodEvictionPolicy?: string } | undefined)?.unhealthyPodEvictionPolicy;
  if (policy === "AlwaysAllow") return true;
  const s = (pdb.status ?? {}) as BudgetStatus;
  return (
    (s.observedGeneration ?? 0) >= (pdb.metadata.generation ?? 0) &&
    (s.desiredHealthy ?? 0) > 0 &&
    (s.currentHealthy ?? 0) >= (s.desiredHealthy ?? 0)
  );
}

function budgetsSelecting(c: SubresourceContext, pod: KubeObject): KubeObject[] {
  return c.svc.store
    .list("policy/poddisruptionbudgets", `${pod.metadata.namespace ?? ""}/`)
    .map((e) => e.obj)
    .filter((pdb) => {
      const sel = (pdb.spec as { selector?: Parameters<typeof fromLabelSelectorObject>[0] } | undefined)?.selector;
      // A budget without a selector selects nothing (policy/v1), one with an empty selector selects every pod.
      if (!isObject(sel)) return false;
      try {
        return matchLabels(fromLabelSelectorObject(sel), pod.metadata.labels);
      } catch {
        // A selector that does not parse selects nothing (kube-apiserver skips such a budget).
        return false;
      }
    });
}

/** Consumes one disruption of the pod's single budget (synchronously: no other write can interleave). */
async function consumeBudget(c: SubresourceContext, pod: KubeObject, dryRun: boolean): Promise<void> {
  const budgets = budgetsSelecting(c, pod);
  if (budgets.length === 0) return;
  if (budgets.length > 1)
    // kube-apiserver answers a bare Status (code 500, no reason) rather than an InternalError.
    throw statusError(
      500,
      "",
      "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
    );
  const pdb = budgets[0];
  if (unhealthyMayGo(pdb, pod)) return;
  const next = checkDisruptionBudget(pdb, pod.metadata.name ?? "", new Date().toISOString().slice(0, 19) + "Z");
  if (dryRun) return;
  const { committed } = c.svc.store.put(
    "policy/poddisruptionbudgets",
    `${pdb.metadata.namespace ?? ""}/${pdb.metadata.name ?? ""}`,
    { ...structuredClone(pdb), status: next },
  );
  await committed;
}

function evictionBody(b: unknown, name: string): KubeObject {
  if (!isObject(b)) throw badRequest("the body of the request was not an Eviction");
  const meta = isObject(b.metadata) ? b.metadata : {};
  if (typeof meta.name === "string" && meta.name !== "" && meta.name !== name)
    throw badRequest("name in URL does not match name in Eviction object");
  if (b.deleteOptions !== undefined && b.deleteOptions !== null && !isObject(b.deleteOptions))
    throw badRequest("the body of the request was not an Eviction: deleteOptions is not an object");
  return {
    ...b,
    apiVersion: typeof b.apiVersion === "string" ? b.apiVersion : "policy/v1",
    kind: "Eviction",
    metadata: { ...meta, name, namespace: typeof meta.namespace === "string" ? meta.namespace : undefined },
  };
}

/** Runs the admission chain for the eviction as kube-apiserver does (CREATE on pods/eviction). */
async function admitEviction(c: SubresourceContext, def: ResourceDef, eviction: KubeObject): Promise<KubeObject> {
  const attrs = {
    operation: "CREATE" as const,
    group: def.group,
    version: c.info.version,
    kind: "Eviction",
    objectKind: { group: "policy", version: "v1", kind: "Eviction" },
    resource: def.resource,
    subResource: "eviction",
    namespace: c.info.namespace ?? "",
    name: c.info.name ?? "",
    object: eviction,
    oldObject: null,
    dryRun: c.ctx.dryRun,
    userInfo: c.ctx.user,
    options: c.ctx.options,
  };
  const mutated = (await c.svc.admission.mutate(attrs)) ?? eviction;
  await c.svc.admission.validate({ ...attrs, object: mutated });
  return mutated;
}

/**
 * Adds the pod condition DisruptionTarget (reason EvictionByEvictionAPI) before the delete, as kube-apiserver does
 * (PodDisruptionConditions), so the pod's controller and its kubelet see why it goes.
 */
async function markDisruptionTarget(c: SubresourceContext, name: string): Promise<void> {
  const id = `${c.info.namespace ?? ""}/${name}`;
  const pod = c.svc.store.get("core/pods", id)?.obj;
  if (!pod) return;
  const status = (pod.status ?? {}) as { conditions?: unknown[] };
  const conditions = status.conditions ?? [];
  const cur = conditions.find((x) => isObject(x) && x.type === "DisruptionTarget") as
    | Record<string, unknown>
    | undefined;
  const want = {
    type: "DisruptionTarget",
    status: "True",
    reason: "EvictionByEvictionAPI",
    message: "Eviction API: evicting",
  };
  if (cur && cur.status === want.status && cur.reason === want.reason && cur.message === want.message) return;
  const lastTransitionTime =
    cur?.status === want.status && typeof cur.lastTransitionTime === "string"
      ? cur.lastTransitionTime
      : new Date().toISOString().slice(0, 19) + "Z";
  const next = structuredClone(pod);
  next.status = {
    ...status,
    conditions: [
      ...conditions.filter((x) => !(isObject(x) && x.type === "DisruptionTarget")),
      { ...want, lastProbeTime: null, lastTransitionTime },
    ],
  };
  const { committed } = c.svc.store.put("core/pods", id, next);
  await committed;
}

/** False when deleteObject will refuse `opts` for `pod` (a precondition that does not hold, a bad grace period). */
function deleteWouldProceed(pod: KubeObject, opts: DeleteOptions): boolean {
  const pre = opts.preconditions;
  if (pre?.uid && pre.uid !== pod.metadata.uid) return false;
  if (pre?.resourceVersion && pre.resourceVersion !== pod.metadata.resourceVersion) return false;
  const grace = opts.gracePeriodSeconds;
  return grace === undefined || (Number.isInteger(grace) && grace >= 0);
}

/** The pods/eviction subresource handler. */
export async function serveEviction(c: SubresourceContext): Promise<void> {
  if (c.req.method !== "POST") throw statusError(405, "MethodNotAllowed", "only POST is supported on pods/eviction");
  const name = c.info.name as string;
  const eviction = await admitEviction(c, c.def, evictionBody(await c.body(), name));
  // DeleteOptions checked as on DELETE (propagationPolicy); the grace period is checked by deleteObject.
  const opts = deleteOptions(eviction.deleteOptions, new URLSearchParams()) as DeleteOptions & { dryRun?: unknown };
  const ctx = Array.isArray(opts.dryRun) && opts.dryRun[0] === "All" ? { ...c.ctx, dryRun: true } : c.ctx;
  const pod = c.svc.get(c.def, c.info.namespace, name).obj;
  if (!ignoresBudget(pod)) await consumeBudget(c, pod, ctx.dryRun);
  // The condition goes on only when the delete will go through (kube-apiserver checks the preconditions first).
  if (!ctx.dryRun && deleteWouldProceed(pod, opts)) await markDisruptionTarget(c, name);
  await deleteObject(c.svc, c.def, c.info.namespace, name, opts, ctx, { admit: false });
  sendJson(c.res, 201, { kind: "Status", apiVersion: "v1", metadata: {}, status: "Success", code: 201 });
}
