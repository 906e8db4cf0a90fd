/**
 * The VMI controller (KubeVirt `watch/vmi`): creates each VMI's virt-launcher Pod, drives the phase from Pending to
 * Scheduled (`vmi-status.ts` decides), fails VMIs whose pod failed or vanished, and on VMI deletion deletes the pods
 * and then drops the VMI finalizer. VMIs have no status subresource, so status and finalizer go in one UPDATE with
 * the cached resourceVersion as precondition (KubeVirt uses UPDATE for VMIs too). Until the cache shows that update,
 * reconciles of the VMI are skipped (`UnobservedWrites`): they would replan from the replaced version and conflict.
 */
import {
  claimOfVolume,
  emulationAllowed,
  FINALIZER,
  isVmiFinal,
  KIND,
  type KubeVirtConfiguration,
  keyOf,
  type ObjectKey,
  objectKey,
  type PersistentVolumeClaimInfo,
  removeCondition,
  setCondition,
  splitKey,
  type VirtualMachineInstance,
  type VirtualMachineInstanceStatus,
  VMI_CONDITION,
  volumeStatuses,
  volumeStatusOf,
} from "@kvt/api";
import {
  deepEqual,
  done,
  type EventSink,
  type Expectations,
  type InformerHandlers,
  isNotFound,
  type Pod,
  type ReconcileContext,
  type Reconciler,
  type ResourceClient,
  type Result,
  SyncError,
  UnobservedWrites,
} from "@kvt/kube";
import { renderLauncherPod } from "./pod-template.ts";
import { planVmi, podIsFinal } from "./vmi-status.ts";

/** What the VMI controller needs. */
export interface VmiControllerDeps {
  readonly vmis: { get(key: ObjectKey): VirtualMachineInstance | undefined };
  /** The pods a VMI owns (launcher and migration target), by VMI uid. */
  readonly podsOf: (vmiUid: string) => Pod[];
  readonly vmiClient: Pick<ResourceClient<VirtualMachineInstance>, "update">;
  readonly podClient: Pick<ResourceClient<Pod>, "create" | "delete">;
  readonly recorder: EventSink;
  /** Pod creations/deletions per VMI key. */
  readonly expectations: Expectations;
  /** The KubeVirt CR's `spec.configuration` now (`useEmulation` shapes the launcher pod); default none. */
  readonly clusterConfig?: () => KubeVirtConfiguration | undefined;
  /** The launcher pods' image; default the pod template's. */
  readonly launcherImage?: string;
  /**
   * The claim `namespace/name` as volumeStatus shows it, undefined while it does not exist. Without it (tests that
   * use no claims) every claim counts as existing and volumeStatus carries no claim info.
   */
  readonly claim?: (namespace: string, name: string) => PersistentVolumeClaimInfo | undefined;
  /** VMI updates the cache has not shown yet; default: a fresh tracker. */
  readonly writes?: UnobservedWrites;
  readonly now?: () => number;
}

/** The key of the VMI that controls `pod`, if any. */
export function vmiKeyOfPod(pod: Pod): ObjectKey | undefined {
  const owner = pod.metadata?.ownerReferences?.find((o) => o.controller && o.kind === KIND.VirtualMachineInstance);
  return owner ? objectKey(pod.metadata?.namespace, owner.name) : undefined;
}

/** Reconciles VirtualMachineInstances. */
export class VmiController implements Reconciler {
  readonly #d: VmiControllerDeps;
  readonly #writes: UnobservedWrites;
  constructor(deps: VmiControllerDeps) {
    this.#d = deps;
    this.#writes = deps.writes ?? new UnobservedWrites();
  }

  /** Informer handlers: VMI changes enqueue the VMI; pod changes lower expectations and enqueue their VMI. */
  handlers(enqueue: (key: ObjectKey) => void): {
    vmi: InformerHandlers<VirtualMachineInstance>;
    pod: InformerHandlers<Pod>;
  } {
    const e = this.#d.expectations;
    const forPod = (pod: Pod, f?: (key: ObjectKey) => void): void => {
      const key = vmiKeyOfPod(pod);
      if (!key) return;
      f?.(key);
      enqueue(key);
    };
    return {
      vmi: {
        onAdd: (v) => enqueue(keyOf(v)),
        onUpdate: (_o, v) => enqueue(keyOf(v)),
        onDelete: (v) => enqueue(keyOf(v)),
      },
      pod: {
        onAdd: (p) => forPod(p, (k) => e.creationObserved(k)),
        onUpdate: (_o, p) => forPod(p),
        onDelete: (p) => forPod(p, (k) => e.deletionObserved(k, p.metadata?.uid)),
      },
    };
  }

  async reconcile(key: ObjectKey, ctx: ReconcileContext): Promise<Result> {
    const vmi = this.#d.vmis.get(key);
    if (!vmi) {
      this.#d.expectations.delete(key);
      this.#writes.forget(key);
      return done();
    }
    // Wait for the cache to show our own pod creations/deletions (the pod handler re-enqueues) and our own last
    // update of the VMI (its watch event re-enqueues).
    if (!this.#d.expectations.satisfied(key)) return done();
    if (this.#writes.pending(key, vmi.metadata?.resourceVersion)) return done();
    const pods = this.#d.podsOf(vmi.metadata?.uid ?? "");
    if (vmi.metadata?.deletionTimestamp) return this.#finalize(vmi, pods, ctx);
    if (isVmiFinal(vmi)) return done();
    const now = new Date((this.#d.now ?? Date.now)()).toISOString();
    const plan = planVmi(vmi, pods, now);
    let syncError: SyncError | undefined;
    let status = this.#withVolumeStatus(vmi, plan.status);
    const missing = plan.createPod ? this.#missingClaim(vmi) : undefined;
    if (missing) {
      // KubeVirt's FailedPvcNotFound: the VMI waits in Pending, and the claim's creation re-enqueues it.
      const message = `PVC ${missing} does not exist, waiting for it to appear`;
      status = {
        ...status,
        conditions: setCondition(
          [...(status.conditions ?? [])],
          { type: VMI_CONDITION.Synchronized, status: "False", reason: "FailedPvcNotFound", message },
          now,
        ),
      };
      if (!vmi.status?.conditions?.some((c) => c.reason === "FailedPvcNotFound"))
        this.#d.recorder.event(vmi, "Warning", "FailedPvcNotFound", message);
    } else if (status.conditions?.some((c) => c.reason === "FailedPvcNotFound")) {
      status = { ...status, conditions: removeCondition(status.conditions, VMI_CONDITION.Synchronized) };
    }
    if (!missing && plan.createPod) {
      syncError = await this.#createPod(vmi, ctx);
      // The pod exists now: go on to Scheduling in the same write instead of waiting for the informer to say so.
      if (!syncError) status = planVmi({ ...vmi, status }, [], now, { podCreated: true }).status;
    }
    // Only status and finalizers change: a shallow copy suffices (the cached VMI itself is never modified).
    const finalizers = vmi.metadata?.finalizers ?? [];
    const addFinalizer = !finalizers.includes(FINALIZER.vmi);
    if (addFinalizer || !deepEqual(status, vmi.status)) {
      const next: VirtualMachineInstance = {
        ...vmi,
        metadata: { ...vmi.metadata, ...(addFinalizer ? { finalizers: [...finalizers, FINALIZER.vmi] } : {}) },
        status,
      };
      await this.#d.vmiClient.update(next);
      this.#writes.wrote(key, vmi.metadata?.resourceVersion);
      if (plan.status.phase !== vmi.status?.phase)
        ctx.logger.info({ from: vmi.status?.phase ?? "", to: plan.status.phase }, "VMI phase changed");
    }
    if (syncError) throw syncError;
    return done();
  }

  /** `status` with volumeStatus as KubeVirt's controller keeps it (fields the handler adds are kept by name). */
  #withVolumeStatus(vmi: VirtualMachineInstance, status: VirtualMachineInstanceStatus): VirtualMachineInstanceStatus {
    const ns = vmi.metadata?.namespace ?? "default";
    const claim = this.#d.claim;
    const wanted = volumeStatusOf(vmi, (name) => claim?.(ns, name));
    const old = new Map(volumeStatuses(status).map((v) => [v.name, v]));
    const merged = wanted.map((v) => ({ ...old.get(v.name), ...v }));
    if (merged.length === 0 && status.volumeStatus === undefined) return status;
    return { ...status, volumeStatus: merged };
  }

  /** The first claim a volume names that does not exist (`namespace/name`), if any. */
  #missingClaim(vmi: VirtualMachineInstance): string | undefined {
    const claim = this.#d.claim;
    if (!claim) return undefined;
    const ns = vmi.metadata?.namespace ?? "default";
    for (const v of vmi.spec.volumes ?? []) {
      const name = claimOfVolume(v);
      if (name !== undefined && !claim(ns, name)) return `${ns}/${name}`;
    }
    return undefined;
  }

  async #createPod(vmi: VirtualMachineInstance, ctx: ReconcileContext): Promise<SyncError | undefined> {
    const key = keyOf(vmi);
    let pod: Pod;
    try {
      const ns = vmi.metadata?.namespace ?? "default";
      const claim = this.#d.claim;
      pod = renderLauncherPod(vmi, {
        allowEmulation: emulationAllowed(this.#d.clusterConfig?.()),
        ...(this.#d.launcherImage ? { launcherImage: this.#d.launcherImage } : {}),
        ...(claim ? { claims: (name: string) => claim(ns, name) } : {}),
      });
    } catch (error) {
      this.#d.recorder.event(vmi, "Warning", "FailedCreate", `Error rendering pod: ${String(error)}`);
      return new SyncError("FailedCreate", `Cannot render the launcher pod: ${String(error)}`, {
        cause: error,
        requeue: false,
      });
    }
    try {
      const created = await this.#d.expectations.creating(key, () => this.#d.podClient.create(pod));
      ctx.logger.info({ pod: created.metadata?.name }, "created launcher pod");
      this.#d.recorder.event(
        vmi,
        "Normal",
        "SuccessfulCreate",
        `Created virtual machine pod ${created.metadata?.name}`,
      );
      return undefined;
    } catch (error) {
      this.#d.recorder.event(vmi, "Warning", "FailedCreate", `Error creating pod: ${String(error)}`);
      return new SyncError("FailedCreate", `Error creating pod: ${String(error)}`, { cause: error });
    }
  }

  /** VMI being deleted: delete its live pods, then drop the finalizer once none is left running. */
  async #finalize(vmi: VirtualMachineInstance, pods: Pod[], ctx: ReconcileContext): Promise<Result> {
    const key = keyOf(vmi);
    const running = pods.filter((p) => !podIsFinal(p));
    for (const pod of running.filter((p) => !p.metadata?.deletionTimestamp)) {
      const uid = pod.metadata?.uid ?? "";
      try {
        await this.#d.expectations.deleting(key, uid, () =>
          this.#d.podClient.delete(pod.metadata?.namespace ?? "", pod.metadata?.name ?? "", {
            preconditions: { uid },
          }),
        );
        this.#d.recorder.event(vmi, "Normal", "SuccessfulDelete", `Deleted virtual machine pod ${pod.metadata?.name}`);
      } catch (error) {
        if (!isNotFound(error)) {
          this.#d.recorder.event(
            vmi,
            "Warning",
            "FailedDelete",
            `Error deleting pod ${pod.metadata?.name}: ${String(error)}`,
          );
          throw new SyncError("FailedDelete", `Error deleting pod: ${String(error)}`, { cause: error });
        }
      }
    }
    if (running.length > 0) return done();
    const finalizers = vmi.metadata?.finalizers ?? [];
    if (!finalizers.includes(FINALIZER.vmi)) return done();
    const next = { ...vmi, metadata: { ...vmi.metadata, finalizers: finalizers.filter((f) => f !== FINALIZER.vmi) } };
    await this.#d.vmiClient.update(next);
    this.#writes.wrote(key, vmi.metadata?.resourceVersion);
    ctx.logger.info({ vmi: splitKey(key).name }, "launcher pods gone; released the VMI");
    return done();
  }
}
