/**
 * The KubeVirt CR's status: virt-operator's report of the install (phase Deploying/Deployed, conditions Available,
 * Progressing, Degraded, Created), written by the virt-controller leader, as deploy/ installs the components without
 * an operator. "Available" is what `kubectl wait kubevirt/kubevirt --for=condition=Available` waits for.
 *
 * ```
 *   Deployment virt-api, Deployment virt-controller, DaemonSet virt-handler (the install namespace, by name)
 *        │ get (each reconcile; requeued every 5 s until Available, then every 30 s)
 *        v
 *   planKubeVirtStatus (pure) ──> status differs from the CR's? ──> updateStatus(KubeVirt)
 * ```
 * When none of the three exists (the local cluster runs the components as processes) the status is left alone.
 * A workload is ready when it exists and every replica it wants is available (a Deployment's `availableReplicas`
 * reaches `spec.replicas`; a DaemonSet's `numberAvailable` reaches `desiredNumberScheduled`, at least one). Reasons
 * and messages are virt-operator's (AllComponentsReady / "All components are ready.", DeploymentInProgress).
 */
import type { KubeVirt } from "@kvt/api";
import {
  isNotFound,
  type KubeObject,
  type ReconcileContext,
  type Reconciler,
  type ResourceClient,
  type Result,
  requeueAfter,
} from "@kvt/kube";

/** apps/v1 Deployment, the fields read here. */
export interface DeploymentView extends KubeObject {
  readonly spec?: { readonly replicas?: number };
  readonly status?: { readonly availableReplicas?: number; readonly observedGeneration?: number };
}

/** apps/v1 DaemonSet, the fields read here. */
export interface DaemonSetView extends KubeObject {
  readonly status?: { readonly desiredNumberScheduled?: number; readonly numberAvailable?: number };
}

/** apps/v1 resource types (libs/kube carries core/v1 and KubeVirt's; these two are read only here). */
export const APPS_V1 = {
  deployments: { group: "apps", version: "v1", plural: "deployments", kind: "Deployment", namespaced: true },
  daemonSets: { group: "apps", version: "v1", plural: "daemonsets", kind: "DaemonSet", namespaced: true },
} as const;

/** The workloads deploy/ installs (tools/release workloads.ts), by kind and name. */
export const COMPONENT_WORKLOADS = {
  deployments: ["virt-api", "virt-controller"],
  daemonSets: ["virt-handler"],
} as const;

/** One component workload as observed: missing, or wanting `desired` replicas of which `available` are. */
export interface WorkloadState {
  readonly kind: "Deployment" | "DaemonSet";
  readonly name: string;
  /** Undefined when the object does not exist. */
  readonly desired?: number;
  readonly available?: number;
}

/** A KubeVirt CR condition. */
export interface KubeVirtCondition {
  readonly type: string;
  readonly status: "True" | "False" | "Unknown";
  readonly reason: string;
  readonly message: string;
  readonly lastTransitionTime: string;
}

/** The status fields this controller owns. */
export interface KubeVirtStatusPlan {
  readonly phase: "Deploying" | "Deployed";
  readonly conditions: readonly KubeVirtCondition[];
}

const READY_REASON = "AllComponentsReady";
const READY_MESSAGE = "All components are ready.";
const PROGRESS_REASON = "DeploymentInProgress";
const CREATED_REASON = "AllResourcesCreated";
const CREATED_MESSAGE = "All resources were created.";

/** Why `w` is not ready, or undefined when it is. */
export function workloadNotReady(w: WorkloadState): string | undefined {
  if (w.desired === undefined) return `${w.kind} ${w.name} does not exist`;
  if (w.desired < 1) return `${w.kind} ${w.name} wants no replicas`;
  const available = w.available ?? 0;
  if (available < w.desired) return `${w.kind} ${w.name} has ${available} of ${w.desired} replicas available`;
  return undefined;
}

/**
 * The phase and conditions for `workloads`, keeping each condition's `lastTransitionTime` from `previous` while its
 * status is unchanged (`now` otherwise).
 */
export function planKubeVirtStatus(
  workloads: readonly WorkloadState[],
  previous: readonly {
    readonly type?: string;
    readonly status?: string;
    readonly lastTransitionTime?: string | null;
  }[],
  now: Date,
): KubeVirtStatusPlan {
  const problems = workloads.map(workloadNotReady).filter((p): p is string => p !== undefined);
  const ready = problems.length === 0;
  const created = workloads.every((w) => w.desired !== undefined);
  const progressMessage = `Deploying: ${problems.join("; ")}.`;
  const condition = (type: string, status: "True" | "False", reason: string, message: string): KubeVirtCondition => {
    const before = previous.find((c) => c.type === type);
    const since = before?.status === status && before.lastTransitionTime ? before.lastTransitionTime : undefined;
    return { type, status, reason, message, lastTransitionTime: since ?? now.toISOString() };
  };
  return {
    phase: ready ? "Deployed" : "Deploying",
    conditions: [
      ready
        ? condition("Available", "True", READY_REASON, READY_MESSAGE)
        : condition("Available", "False", PROGRESS_REASON, progressMessage),
      ready
        ? condition("Progressing", "False", READY_REASON, READY_MESSAGE)
        : condition("Progressing", "True", PROGRESS_REASON, progressMessage),
      condition("Degraded", "False", ready ? READY_REASON : PROGRESS_REASON, ready ? READY_MESSAGE : progressMessage),
      created
        ? condition("Created", "True", CREATED_REASON, CREATED_MESSAGE)
        : condition("Created", "False", PROGRESS_REASON, progressMessage),
    ],
  };
}

/** Whether `plan` already is `kv`'s status (nothing to write). */
export function statusMatches(kv: KubeVirt, plan: KubeVirtStatusPlan): boolean {
  const status = kv.status as { phase?: string; conditions?: readonly Partial<KubeVirtCondition>[] } | undefined;
  if (status?.phase !== plan.phase) return false;
  const have = status.conditions ?? [];
  if (have.length !== plan.conditions.length) return false;
  return plan.conditions.every((c) => {
    const h = have.find((x) => x.type === c.type);
    return h?.status === c.status && h.reason === c.reason && h.message === c.message;
  });
}

/** What the controller reads and writes. */
export interface KubeVirtStatusDeps {
  /** The install namespace (the CR's and the workloads'). */
  readonly namespace: string;
  /** The KubeVirt CR in force, from the informer cache (undefined: none yet). */
  readonly kubevirt: () => KubeVirt | undefined;
  readonly kubevirts: ResourceClient<KubeVirt>;
  readonly deployments: ResourceClient<DeploymentView>;
  readonly daemonSets: ResourceClient<DaemonSetView>;
  readonly now?: () => Date;
}

/** Requeue while the install is not Available: the workloads are polled, not watched. */
const PROGRESS_POLL_MS = 5_000;
/** Requeue once Available, to notice a component going away. */
const RESYNC_MS = 30_000;

/** Keeps the KubeVirt CR's status in line with its component workloads (one key: the CR). */
export class KubeVirtStatusController implements Reconciler {
  readonly #d: KubeVirtStatusDeps;

  constructor(deps: KubeVirtStatusDeps) {
    this.#d = deps;
  }

  async reconcile(_key: unknown, ctx: ReconcileContext): Promise<Result> {
    const kv = this.#d.kubevirt();
    if (!kv) return requeueAfter(RESYNC_MS);
    const workloads = await this.#observe();
    // None of the three exists: the components do not run as this namespace's workloads (the local cluster runs
    // them as processes and reports its own readiness), so there is nothing to report from, and no 5 s poll.
    if (workloads.every((w) => w.desired === undefined)) return requeueAfter(RESYNC_MS);
    const plan = planKubeVirtStatus(workloads, kv.status?.conditions ?? [], this.#d.now?.() ?? new Date());
    if (!statusMatches(kv, plan)) {
      const updated = structuredClone(kv) as KubeVirt & { status?: Record<string, unknown> };
      updated.status = { ...(updated.status ?? {}), phase: plan.phase, conditions: [...plan.conditions] };
      await this.#d.kubevirts.updateStatus(updated);
      ctx.logger.info({ phase: plan.phase }, `KubeVirt ${kv.metadata?.namespace}/${kv.metadata?.name} status updated`);
    }
    return requeueAfter(plan.phase === "Deployed" ? RESYNC_MS : PROGRESS_POLL_MS);
  }

  async #observe(): Promise<WorkloadState[]> {
    const ns = this.#d.namespace;
    const get = async <T>(p: Promise<T>): Promise<T | undefined> => {
      try {
        return await p;
      } catch (error) {
        if (isNotFound(error)) return undefined; // reported as "does not exist"
        throw error;
      }
    };
    const states: WorkloadState[] = [];
    for (const name of COMPONENT_WORKLOADS.deployments) {
      const d = await get(this.#d.deployments.get(ns, name));
      states.push({
        kind: "Deployment",
        name,
        ...(d ? { desired: d.spec?.replicas ?? 1, available: d.status?.availableReplicas ?? 0 } : {}),
      });
    }
    for (const name of COMPONENT_WORKLOADS.daemonSets) {
      const ds = await get(this.#d.daemonSets.get(ns, name));
      states.push({
        kind: "DaemonSet",
        name,
        ...(ds ? { desired: ds.status?.desiredNumberScheduled ?? 0, available: ds.status?.numberAvailable ?? 0 } : {}),
      });
    }
    return states;
  }
}
