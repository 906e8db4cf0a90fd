/**
 * The VirtualMachinePool controller (KubeVirt `watch/pool`): keeps `spec.replicas` VMs named `<pool>-<index>` from
 * the VM template, scales out at the lowest free indices and in by the selection policy, holds the pool finalizer on
 * the pool and its VMs (dropped when a VM is deleted and when the pool goes), releases VMs the selector lost, and
 * writes replicas, readyReplicas, labelSelector and the ReplicaPaused/ReplicaFailure conditions. With an updater
 * (`pool-updater.ts`) it also records pool revisions and brings VMs and VMIs to a changed template; autohealing
 * (`pool-autoheal.ts`) replaces VMs that keep failing to start. Not carried over from KubeVirt: state preservation
 * on scale-in (this platform has no DataVolumes to keep).
 */
import {
  FINALIZER,
  KIND,
  keyOf,
  LABEL,
  type LabelSelector,
  labelSelectorOf,
  type ObjectKey,
  objectKey,
  splitKey,
  type VirtualMachine,
  type VirtualMachineInstance,
  type VirtualMachinePool,
} from "@kvt/api";
import {
  cachedController,
  deepEqual,
  diffMembers,
  done,
  type EventSink,
  type Expectations,
  firstRejection,
  type InformerHandlers,
  isInvalid,
  isNotFound,
  type JsonPatchOp,
  type ReconcileContext,
  type Reconciler,
  type ResourceClient,
  type Result,
  requeueAfter,
  SyncError,
} from "@kvt/kube";
import { DEFAULT_BURST_REPLICAS } from "../replicaset/replicaset-plan.ts";
import { failingVms } from "./pool-autoheal.ts";
import { desiredReplicas, newVmNames, nextPoolStatus, ownedVms, scaleInOrder, vmFromPool } from "./pool-plan.ts";
import type { PoolRevision } from "./pool-revisions.ts";
import type { PoolUpdater, UpdateResult } from "./pool-updater.ts";

/** How soon a pool whose VMIs maxUnavailable held back is looked at again (KubeVirt's defaultRetryDelay). */
const UPDATE_RETRY_MS = 3000;

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

type Pool = VirtualMachinePool;
type Vm = VirtualMachine;

/** What the pool controller needs. */
export interface PoolControllerDeps {
  readonly pools: { get(key: ObjectKey): Pool | undefined };
  readonly vms: { get(key: ObjectKey): Vm | undefined };
  /** The VMs of a namespace, from the cache. */
  readonly vmsIn: (namespace: string) => Vm[];
  readonly poolClient: Pick<ResourceClient<Pool>, "patch">;
  readonly vmClient: Pick<ResourceClient<Vm>, "create" | "delete" | "patch">;
  readonly recorder: EventSink;
  /** VM creations and deletions per pool key. */
  readonly expectations: Expectations;
  /** At most this many creations or deletions per pass (KubeVirt's burst replicas, 250). */
  readonly burstReplicas?: number;
  readonly now?: () => number;
  /** Random source of the Random scale-in policy (tests pin it). */
  readonly random?: () => number;
  /** Revisions and updates of VMs to a changed template; without it the pool only scales. */
  readonly updater?: PoolUpdater;
}

/** Reconciles VirtualMachinePools. */
export class PoolController implements Reconciler {
  readonly #d: PoolControllerDeps;
  constructor(deps: PoolControllerDeps) {
    this.#d = deps;
  }

  /** Informer handlers: pool events enqueue it; VM events of its VMs lower expectations and enqueue it. */
  handlers(enqueue: (key: ObjectKey) => void): {
    pool: InformerHandlers<Pool>;
    vm: InformerHandlers<Vm>;
    revision: InformerHandlers<PoolRevision>;
    vmi: InformerHandlers<VirtualMachineInstance>;
  } {
    const e = this.#d.expectations;
    const onDelete = (vm: Vm): void => {
      const pool = this.#owner(vm);
      if (!pool) return;
      e.deletionObserved(keyOf(pool), vm.metadata?.uid);
      enqueue(keyOf(pool));
    };
    return {
      pool: {
        onAdd: (p) => enqueue(keyOf(p)),
        onUpdate: (_o, p) => enqueue(keyOf(p)),
        onDelete: (p) => enqueue(keyOf(p)),
      },
      vm: {
        onAdd: (vm) => {
          if (vm.metadata?.deletionTimestamp) return onDelete(vm);
          const pool = this.#owner(vm);
          if (!pool) return;
          e.creationObserved(keyOf(pool));
          enqueue(keyOf(pool));
        },
        onUpdate: (old, cur) => {
          if (old.metadata?.resourceVersion === cur.metadata?.resourceVersion) return;
          if (cur.metadata?.deletionTimestamp) {
            onDelete(cur);
            if (!deepEqual(old.metadata?.labels ?? {}, cur.metadata?.labels ?? {})) onDelete(old);
            return;
          }
          const oldPool = this.#owner(old);
          const curPool = this.#owner(cur);
          if (oldPool && oldPool !== curPool) enqueue(keyOf(oldPool));
          if (curPool) enqueue(keyOf(curPool));
        },
        onDelete,
      },
      revision: {
        // A revision the pool created is in the cache: the creation it expected is observed.
        onAdd: (r) => {
          const pool = this.#owner(r as unknown as Vm);
          if (!pool) return;
          e.creationObserved(keyOf(pool));
          enqueue(keyOf(pool));
        },
        onUpdate: (_o, r) => {
          const pool = this.#owner(r as unknown as Vm);
          if (pool) enqueue(keyOf(pool));
        },
      },
      vmi: {
        // A VMI whose revision differs from its VM's template may need a proactive update.
        onAdd: (vmi) => this.#vmiChanged(vmi, enqueue),
        onUpdate: (_o, vmi) => this.#vmiChanged(vmi, enqueue),
      },
    };
  }

  #vmiChanged(vmi: VirtualMachineInstance, enqueue: (key: ObjectKey) => void): void {
    if (vmi.metadata?.deletionTimestamp) return;
    const vm = cachedController(vmi, KIND.VirtualMachine, (key) => this.#d.vms.get(key));
    if (!vm) return;
    const pool = this.#owner(vm);
    if (!pool) return;
    const want = vm.spec.template.metadata?.labels?.[LABEL.poolRevisionName];
    const have = vmi.metadata?.labels?.[LABEL.poolRevisionName];
    if (want === undefined || have === undefined || want !== have) enqueue(keyOf(pool));
  }

  async reconcile(key: ObjectKey, ctx: ReconcileContext): Promise<Result> {
    const pool = this.#d.pools.get(key);
    if (!pool) {
      this.#d.expectations.delete(key);
      return done();
    }
    let selector: LabelSelector;
    try {
      selector = labelSelectorOf(pool.spec.selector);
    } catch (error) {
      ctx.logger.error({ err: error }, "Invalid selector on pool, will not re-enqueue.");
      return done();
    }
    if (!selector.matches(pool.spec.virtualMachineTemplate?.metadata?.labels ?? {})) {
      ctx.logger.error("Selector does not match template labels, will not re-enqueue.");
      return done();
    }
    const namespace = pool.metadata?.namespace ?? "";
    const { owned, release } = ownedVms(pool, selector, this.#d.vmsIn(namespace));
    // Autohealing: VMs that keep failing to start are deleted, and scale-out replaces them. (KubeVirt looks at every
    // VM of the namespace here; only the pool's own are considered.)
    const failing = failingVms(pool, owned, (this.#d.now ?? Date.now)());
    if (failing.length > 0) await this.#scaleIn(pool, failing, failing.length, ctx);
    for (const vm of release) await this.#release(vm);
    const deleting = pool.metadata?.deletionTimestamp != null;
    if (!deleting) await this.#ensurePoolFinalizer(pool, true);
    let syncError: { reason: string; message: string } | undefined;
    let retry = false;
    if (this.#d.expectations.satisfied(key) && !pool.spec.paused && !deleting) {
      syncError = await this.#scale(pool, owned, ctx);
      // Updates follow a stable scale, pruning a stable update, each once the cache has caught up.
      const stable = owned.length === desiredReplicas(pool);
      if (!syncError && stable && this.#d.updater && this.#d.expectations.satisfied(key)) {
        const r = await this.#update(pool, owned);
        syncError = r.syncError;
        retry = r.retry;
      }
    } else if (deleting) {
      // The pool goes: its VMs lose the pool finalizer (the garbage collector removes them), then the pool its own.
      for (const vm of this.#d.vmsIn(namespace)) {
        if (selector.matches(vm.metadata?.labels) && vm.metadata?.finalizers?.includes(FINALIZER.pool))
          await this.#dropVmFinalizer(vm);
      }
      await this.#ensurePoolFinalizer(pool, false);
    }
    await this.#writeStatus(pool, owned, selector, syncError);
    if (syncError) throw new SyncError(syncError.reason, syncError.message);
    return retry ? requeueAfter(UPDATE_RETRY_MS) : done();
  }

  /** The update pass, then pruning when nothing was outdated (FailedUpdate, FailedRevisionPruning on error). */
  async #update(
    pool: Pool,
    vms: readonly Vm[],
  ): Promise<{ syncError?: { reason: string; message: string }; retry: boolean }> {
    const updater = this.#d.updater as PoolUpdater;
    let result: UpdateResult;
    try {
      result = await updater.update(pool, vms);
    } catch (error) {
      return {
        syncError: { reason: "FailedUpdate", message: `error during VM update: ${messageOf(error)}` },
        retry: false,
      };
    }
    if (!result.stable || !this.#d.expectations.satisfied(keyOf(pool))) return { retry: result.retry };
    try {
      await updater.prune(pool, vms);
    } catch (error) {
      const message = `error while pruning vmpool revisions: ${messageOf(error)}`;
      return { syncError: { reason: "FailedRevisionPruning", message }, retry: result.retry };
    }
    return { retry: result.retry };
  }

  /** One scaling pass; returns the sync error (FailedScaleOut, FailedScaleIn) if it failed. */
  async #scale(
    pool: Pool,
    vms: readonly Vm[],
    ctx: ReconcileContext,
  ): Promise<{ reason: string; message: string } | undefined> {
    const diff = vms.length - desiredReplicas(pool);
    const burst = this.#d.burstReplicas ?? DEFAULT_BURST_REPLICAS;
    try {
      if (diff === 0) {
        if (pool.spec.scaleInStrategy?.unmanaged) return undefined;
        // VMs deleted by someone else leave the pool: drop our finalizer so they can go, and get replaced.
        for (const vm of vms) if (vm.metadata?.deletionTimestamp) await this.#dropVmFinalizer(vm);
        return undefined;
      }
      if (diff < 0) await this.#scaleOut(pool, Math.min(-diff, burst), ctx);
      else if (!pool.spec.scaleInStrategy?.unmanaged && !pool.spec.scaleInStrategy?.opportunistic)
        await this.#scaleIn(pool, vms, Math.min(diff, burst), ctx);
      return undefined;
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      return diff < 0
        ? { reason: "FailedScaleOut", message: `error during scale out: ${message}` }
        : { reason: "FailedScaleIn", message: `error during scale in: ${message}` };
    }
  }

  async #scaleOut(pool: Pool, count: number, ctx: ReconcileContext): Promise<void> {
    const namespace = pool.metadata?.namespace ?? "";
    const names = newVmNames(pool, count, (name) => this.#d.vms.get(objectKey(namespace, name)) !== undefined);
    // The VMs name their revision: it exists before they do (KubeVirt `ensureControllerRevision`).
    await this.#d.updater?.ensureRevision(pool);
    const results = await this.#d.expectations.creatingAll(
      keyOf(pool),
      names.map((name) => () => this.#d.vmClient.create(vmFromPool(pool, name))),
    );
    results.forEach((r, i) => {
      if (r.status === "fulfilled")
        this.#d.recorder.event(pool, "Normal", "SuccessfulCreate", `Created VM ${namespace}/${names[i] ?? ""}`);
    });
    const first = firstRejection(results);
    ctx.logger.info({ vms: names }, "adding VMs to pool");
    if (first === undefined) return;
    const message = first instanceof Error ? first.message : JSON.stringify(first);
    this.#d.recorder.event(pool, "Warning", "FailedCreate", `Error creating VM: ${message}`);
    throw first instanceof Error ? first : new Error(message, { cause: first });
  }

  async #scaleIn(pool: Pool, vms: readonly Vm[], count: number, ctx: ReconcileContext): Promise<void> {
    const eligible = vms.filter((v) => !v.metadata?.deletionTimestamp);
    // VMs already going count towards the scale-in.
    const n = Math.min(count - (vms.length - eligible.length), eligible.length);
    if (n <= 0) return;
    const victims = scaleInOrder(pool, eligible, this.#d.random).slice(0, n);
    const key = keyOf(pool);
    let first: unknown;
    for (const vm of victims) {
      const { namespace, name } = splitKey(keyOf(vm));
      try {
        await this.#d.expectations.deleting(key, vm.metadata?.uid ?? "", async () => {
          await this.#d.vmClient.delete(namespace, name);
          await this.#dropVmFinalizer(vm);
        });
      } catch (error) {
        this.#d.recorder.event(
          pool,
          "Warning",
          "FailedDelete",
          `Error deleting virtual machine ${namespace}/${name}: ${error instanceof Error ? error.message : String(error)}`,
        );
        first ??= error;
        continue;
      }
      this.#d.recorder.event(
        pool,
        "Normal",
        "SuccessfulDelete",
        `Deleted VM ${namespace}/${name} with uid ${vm.metadata?.uid ?? ""} from pool`,
      );
      ctx.logger.info({ vm: name }, "deleted VM from pool");
    }
    if (first !== undefined) throw first instanceof Error ? first : new Error("Cannot delete VMs", { cause: first });
  }

  /** Removes the pool finalizer from a VM (404: already gone). */
  async #dropVmFinalizer(vm: Vm): Promise<void> {
    const finalizers = vm.metadata?.finalizers ?? [];
    if (!finalizers.includes(FINALIZER.pool)) return;
    const { namespace, name } = splitKey(keyOf(vm));
    try {
      await this.#d.vmClient.patch(namespace, name, [
        { op: "test", path: "/metadata/finalizers", value: finalizers },
        { op: "replace", path: "/metadata/finalizers", value: finalizers.filter((f) => f !== FINALIZER.pool) },
      ]);
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
  }

  /** Lets go of a VM the selector no longer matches: no owner, no pool finalizer (KubeVirt `ReleaseVirtualMachine`). */
  async #release(vm: Vm): Promise<void> {
    const { namespace, name } = splitKey(keyOf(vm));
    const finalizers = (vm.metadata?.finalizers ?? []).filter((f) => f !== FINALIZER.pool);
    try {
      await this.#d.vmClient.patch(namespace, name, [
        { op: "test", path: "/metadata/uid", value: vm.metadata?.uid },
        { op: "add", path: "/metadata/ownerReferences", value: [] },
        { op: "add", path: "/metadata/finalizers", value: finalizers },
      ]);
    } catch (error) {
      if (!isNotFound(error) && !isInvalid(error)) throw error;
    }
  }

  /** Adds (`want`) or removes the pool finalizer on the pool itself. */
  async #ensurePoolFinalizer(pool: Pool, want: boolean): Promise<void> {
    const finalizers = pool.metadata?.finalizers ?? [];
    if (finalizers.includes(FINALIZER.pool) === want) return;
    const next = want ? [...finalizers, FINALIZER.pool] : finalizers.filter((f) => f !== FINALIZER.pool);
    const ops: JsonPatchOp[] = pool.metadata?.finalizers
      ? [
          { op: "test", path: "/metadata/finalizers", value: finalizers },
          { op: "replace", path: "/metadata/finalizers", value: next },
        ]
      : [{ op: "add", path: "/metadata/finalizers", value: next }];
    const { namespace, name } = splitKey(keyOf(pool));
    try {
      await this.#d.poolClient.patch(namespace, name, ops);
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
  }

  async #writeStatus(
    pool: Pool,
    vms: readonly Vm[],
    selector: LabelSelector,
    syncError?: { reason: string; message: string },
  ): Promise<void> {
    const now = new Date((this.#d.now ?? Date.now)()).toISOString().replace(/\.\d{3}Z$/, "Z");
    const status = nextPoolStatus(pool, { vms, selector, syncError, now });
    if (!status) return;
    const ops = diffMembers("/status", pool.status, status);
    if (ops.length === 0) return;
    const { namespace, name } = splitKey(keyOf(pool));
    try {
      await this.#d.poolClient.patch(namespace, name, ops, "status");
    } catch (error) {
      // The pool went away with its last finalizer: nothing to report on.
      if (isNotFound(error)) return;
      throw error;
    }
    const had = (t: string): boolean => pool.status?.conditions?.some((c) => c.type === t) ?? false;
    if (syncError && !had("ReplicaFailure"))
      this.#d.recorder.event(pool, "Warning", syncError.reason, syncError.message);
    if (pool.spec.paused === true && !had("ReplicaPaused"))
      this.#d.recorder.event(pool, "Normal", "SuccessfulPaused", "Pool is paused");
    if (pool.spec.paused !== true && had("ReplicaPaused"))
      this.#d.recorder.event(pool, "Normal", "SuccessfulResume", "Pool is unpaused");
  }

  /** The pool that controls `vm`, if it is in the cache under the referenced uid. */
  #owner(vm: Vm): Pool | undefined {
    return cachedController(vm, KIND.VirtualMachinePool, (key) => this.#d.pools.get(key));
  }
}
