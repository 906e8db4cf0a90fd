/**
 * The VirtualMachineInstanceReplicaSet controller (KubeVirt `watch/replicaset`): keeps `spec.replicas` active VMIs
 * from the template, adopting matching orphans and releasing VMIs the selector no longer matches, deletes finished
 * VMIs so they are replaced, and writes replicas, readyReplicas, labelSelector and the ReplicaPaused/ReplicaFailure
 * conditions. Creations and deletions raise expectations first; the VMI informer lowers them. The decisions are in
 * `replicaset-plan.ts`; this file does the I/O.
 */
import {
  KIND,
  keyOf,
  type LabelSelector,
  labelSelectorOf,
  type ObjectKey,
  splitKey,
  type VirtualMachineInstance,
  type VirtualMachineInstanceReplicaSet,
} from "@kvt/api";
import {
  cachedController,
  controllerRefOf,
  deepEqual,
  diffMembers,
  done,
  type EventSink,
  type Expectations,
  firstRejection,
  type InformerHandlers,
  isInvalid,
  isNotFound,
  type ReconcileContext,
  type Reconciler,
  type ResourceClient,
  type Result,
  SyncError,
} from "@kvt/kube";
import {
  activeVmis,
  claimVmis,
  DEFAULT_BURST_REPLICAS,
  deletionCandidates,
  finishedVmis,
  nextReplicaSetStatus,
  replicaDiff,
  replicaSetOwnerRef,
  vmiFromTemplate,
} from "./replicaset-plan.ts";

type Vmi = VirtualMachineInstance;
type ReplicaSet = VirtualMachineInstanceReplicaSet;

/** What the replica set controller needs. */
export interface ReplicaSetControllerDeps {
  readonly replicaSets: { get(key: ObjectKey): ReplicaSet | undefined };
  /** The replica sets of a namespace (to find who wants an orphan). */
  readonly replicaSetsIn: (namespace: string) => ReplicaSet[];
  /** The VMIs of a namespace, from the cache. */
  readonly vmisIn: (namespace: string) => Vmi[];
  readonly rsClient: Pick<ResourceClient<ReplicaSet>, "get" | "patch">;
  readonly vmiClient: Pick<ResourceClient<Vmi>, "create" | "delete" | "patch">;
  readonly recorder: EventSink;
  /** VMI creations and deletions per replica set key. */
  readonly expectations: Expectations;
  /** At most this many creations or deletions per pass (KubeVirt's burst replicas, 250). */
  readonly burstReplicas?: number;
  readonly now?: () => number;
}

/** Reconciles VirtualMachineInstanceReplicaSets. */
export class ReplicaSetController implements Reconciler {
  readonly #d: ReplicaSetControllerDeps;
  constructor(deps: ReplicaSetControllerDeps) {
    this.#d = deps;
  }

  /** Informer handlers: replica set events enqueue it; VMI events lower expectations and enqueue the owner(s). */
  handlers(enqueue: (key: ObjectKey) => void): {
    replicaSet: InformerHandlers<ReplicaSet>;
    vmi: InformerHandlers<Vmi>;
  } {
    const e = this.#d.expectations;
    const onDelete = (vmi: Vmi): void => {
      const rs = this.#owner(vmi);
      if (!rs) return;
      e.deletionObserved(keyOf(rs), vmi.metadata?.uid);
      enqueue(keyOf(rs));
    };
    const enqueueMatching = (vmi: Vmi): void => {
      for (const rs of this.#matching(vmi)) enqueue(keyOf(rs));
    };
    return {
      replicaSet: {
        onAdd: (rs) => enqueue(keyOf(rs)),
        onUpdate: (_o, rs) => enqueue(keyOf(rs)),
        onDelete: (rs) => enqueue(keyOf(rs)),
      },
      vmi: {
        onAdd: (vmi) => {
          if (vmi.metadata?.deletionTimestamp) return onDelete(vmi);
          const ref = controllerRefOf(vmi);
          if (!ref) return enqueueMatching(vmi);
          const rs = this.#owner(vmi);
          if (!rs) return;
          e.creationObserved(keyOf(rs));
          enqueue(keyOf(rs));
        },
        onUpdate: (old, cur) => {
          if (old.metadata?.resourceVersion === cur.metadata?.resourceVersion) return;
          const labelsChanged = !deepEqual(old.metadata?.labels ?? {}, cur.metadata?.labels ?? {});
          if (cur.metadata?.deletionTimestamp) {
            // A graceful deletion has begun: the replacement need not wait for the VMI to be gone.
            onDelete(cur);
            if (labelsChanged) onDelete(old);
            return;
          }
          const refChanged = !deepEqual(controllerRefOf(old), controllerRefOf(cur));
          const oldOwner = refChanged ? this.#owner(old) : undefined;
          if (oldOwner) enqueue(keyOf(oldOwner));
          if (controllerRefOf(cur)) {
            const rs = this.#owner(cur);
            if (rs) enqueue(keyOf(rs));
            return;
          }
          if (labelsChanged || refChanged) enqueueMatching(cur);
        },
        onDelete,
      },
    };
  }

  async reconcile(key: ObjectKey, ctx: ReconcileContext): Promise<Result> {
    const rs = this.#d.replicaSets.get(key);
    if (!rs) {
      this.#d.expectations.delete(key);
      return done();
    }
    let selector: LabelSelector;
    try {
      selector = labelSelectorOf(rs.spec.selector);
    } catch (error) {
      ctx.logger.error({ err: error }, "Invalid selector on replicaset, will not re-enqueue.");
      return done();
    }
    const templateLabels = rs.spec.template?.metadata?.labels ?? {};
    if (!rs.spec.template || Object.keys(templateLabels).length === 0 || !selector.matches(templateLabels)) {
      ctx.logger.error("Invalid controller spec, will not re-enqueue.");
      return done();
    }
    const needsSync = this.#d.expectations.satisfied(key);
    const namespace = rs.metadata?.namespace ?? "";
    const owned = await this.#claim(rs, selector, this.#d.vmisIn(namespace), ctx);
    const active = activeVmis(owned);
    let scaleError: string | undefined;
    if (needsSync && !rs.spec.paused && !rs.metadata?.deletionTimestamp) {
      try {
        await this.#scale(rs, active, ctx);
        const finished = finishedVmis(owned);
        if (finished.length > 0) await this.#deleteFinished(rs, finished);
      } catch (error) {
        scaleError = error instanceof Error ? error.message : String(error);
      }
    }
    await this.#writeStatus(rs, active, selector, scaleError);
    if (scaleError !== undefined) throw new SyncError("FailedScale", scaleError);
    return done();
  }

  /** Adopts matching orphans (after re-reading the replica set) and releases owned VMIs the selector lost. */
  async #claim(rs: ReplicaSet, selector: LabelSelector, vmis: readonly Vmi[], ctx: ReconcileContext): Promise<Vmi[]> {
    const claim = claimVmis(rs, selector, vmis);
    const owned = [...claim.owned];
    for (const vmi of claim.release) await this.#release(vmi);
    if (claim.adopt.length === 0) return owned;
    // An adoption needs a fresh read: a replica set deleted since the cache saw it must not take VMIs.
    const { namespace, name } = splitKey(keyOf(rs));
    const fresh = await this.#d.rsClient.get(namespace, name);
    if (fresh.metadata?.uid !== rs.metadata?.uid || fresh.metadata?.deletionTimestamp) return owned;
    for (const vmi of claim.adopt) {
      const { name: vmiName } = splitKey(keyOf(vmi));
      try {
        await this.#d.vmiClient.patch(namespace, vmiName, [
          { op: "test", path: "/metadata/uid", value: vmi.metadata?.uid },
          { op: "add", path: "/metadata/ownerReferences", value: [replicaSetOwnerRef(rs)] },
        ]);
        owned.push(vmi);
        ctx.logger.info({ vmi: vmiName }, "adopted orphaned VMI");
      } catch (error) {
        if (!isNotFound(error) && !isInvalid(error)) throw error;
      }
    }
    return owned;
  }

  async #release(vmi: Vmi): Promise<void> {
    const { namespace, name } = splitKey(keyOf(vmi));
    try {
      await this.#d.vmiClient.patch(namespace, name, [
        { op: "test", path: "/metadata/uid", value: vmi.metadata?.uid },
        { op: "add", path: "/metadata/ownerReferences", value: [] },
      ]);
    } catch (error) {
      // Gone, or recreated under another uid: nothing left to release.
      if (!isNotFound(error) && !isInvalid(error)) throw error;
    }
  }

  /** Creates or deletes VMIs so that `active` reaches spec.replicas (at most burstReplicas per pass). */
  async #scale(rs: ReplicaSet, active: readonly Vmi[], ctx: ReconcileContext): Promise<void> {
    const diff = replicaDiff(rs, active);
    if (diff === 0) return;
    const key = keyOf(rs);
    const count = Math.min(Math.abs(diff), this.#d.burstReplicas ?? DEFAULT_BURST_REPLICAS);
    if (diff > 0) {
      await this.#delete(
        rs,
        deletionCandidates(active, count),
        "Error deleting virtual machine instance",
        (v) => `Stopped the virtual machine by deleting the virtual machine instance ${v.metadata?.uid ?? ""}`,
      );
      return;
    }
    const results = await this.#d.expectations.creatingAll(
      key,
      Array.from({ length: count }, () => () => this.#d.vmiClient.create(vmiFromTemplate(rs))),
    );
    for (const r of results) {
      if (r.status === "fulfilled")
        this.#d.recorder.event(
          rs,
          "Normal",
          "SuccessfulCreate",
          `Started the virtual machine by creating the new virtual machine instance ${r.value.metadata?.name ?? ""}`,
        );
      else
        this.#d.recorder.event(
          rs,
          "Warning",
          "FailedCreate",
          `Error creating virtual machine instance: ${String(r.reason)}`,
        );
    }
    const first = firstRejection(results);
    const created = results.filter((r) => r.status === "fulfilled").length;
    ctx.logger.info({ created, wanted: count }, "scaled up");
    if (first !== undefined)
      throw first instanceof Error ? first : new Error("Cannot scale the replica set", { cause: first });
  }

  async #deleteFinished(rs: ReplicaSet, finished: readonly Vmi[]): Promise<void> {
    const batch = finished.slice(0, this.#d.burstReplicas ?? DEFAULT_BURST_REPLICAS);
    await this.#delete(
      rs,
      batch,
      "Error deleting finished virtual machine",
      (v) => `Deleted finished virtual machine: ${v.metadata?.uid ?? ""}`,
    );
  }

  /** Deletes `vmis` with expectations raised first; events as KubeVirt words them; throws the first error. */
  async #delete(rs: ReplicaSet, vmis: readonly Vmi[], failure: string, success: (v: Vmi) => string): Promise<void> {
    const key = keyOf(rs);
    const results = await Promise.allSettled(
      vmis.map((v) => {
        const { namespace, name } = splitKey(keyOf(v));
        return this.#d.expectations.deleting(key, v.metadata?.uid ?? "", () =>
          this.#d.vmiClient.delete(namespace, name),
        );
      }),
    );
    results.forEach((r, i) => {
      const v = vmis[i];
      if (r.status === "fulfilled") this.#d.recorder.event(rs, "Normal", "SuccessfulDelete", success(v));
      else
        this.#d.recorder.event(
          rs,
          "Warning",
          "FailedDelete",
          `${failure} ${v.metadata?.name ?? ""}: ${String(r.reason)}`,
        );
    });
    const first = firstRejection(results);
    if (first !== undefined)
      throw first instanceof Error ? first : new Error("Cannot scale the replica set", { cause: first });
  }

  async #writeStatus(
    rs: ReplicaSet,
    active: readonly Vmi[],
    selector: LabelSelector,
    scaleError?: string,
  ): Promise<void> {
    const now = new Date((this.#d.now ?? Date.now)()).toISOString().replace(/\.\d{3}Z$/, "Z");
    const status = nextReplicaSetStatus(rs, { active, selector, scaleError, now });
    if (!status) return;
    const ops = diffMembers("/status", rs.status, status);
    if (ops.length === 0) return;
    const { namespace, name } = splitKey(keyOf(rs));
    await this.#d.rsClient.patch(namespace, name, ops, "status");
    const wasPaused = rs.status?.conditions?.some((c) => c.type === "ReplicaPaused") ?? false;
    if (rs.spec.paused === true && !wasPaused) this.#d.recorder.event(rs, "Normal", "SuccessfulPaused", "Paused");
    if (rs.spec.paused !== true && wasPaused) this.#d.recorder.event(rs, "Normal", "SuccessfulResumed", "Resumed");
  }

  /** The replica set that controls `vmi`, if it is in the cache under the referenced uid. */
  #owner(vmi: Vmi): ReplicaSet | undefined {
    return cachedController(vmi, KIND.VirtualMachineInstanceReplicaSet, (key) => this.#d.replicaSets.get(key));
  }

  /** The replica sets of the VMI's namespace whose selector matches its labels. */
  #matching(vmi: Vmi): ReplicaSet[] {
    return this.#d.replicaSetsIn(vmi.metadata?.namespace ?? "").filter((rs) => {
      try {
        return labelSelectorOf(rs.spec.selector).matches(vmi.metadata?.labels);
      } catch {
        // An invalid selector matches nothing (KubeVirt logs it and skips the replica set).
        return false;
      }
    });
  }
}
