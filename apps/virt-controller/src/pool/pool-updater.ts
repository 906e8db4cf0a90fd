/**
 * The update half of the VirtualMachinePool controller (KubeVirt `watch/pool` update, revisions and pruning): records
 * the pool spec in a ControllerRevision, brings outdated VMs to the pool's template (opportunistic), restarts or
 * relabels the VMIs of up-to-date VMs within maxUnavailable (proactive, unless the update strategy is opportunistic),
 * and deletes revisions no VM or VMI uses any more. The decisions are in `pool-revisions.ts`.
 */
import {
  keyOf,
  LABEL,
  type ObjectKey,
  objectKey,
  splitKey,
  type VirtualMachine,
  type VirtualMachineInstance,
  type VirtualMachinePool,
} from "@kvt/api";
import { type EventSink, type Expectations, isAlreadyExists, isNotFound, type ResourceClient } from "@kvt/kube";
import { filterBySelectors, vmFromPool } from "./pool-plan.ts";
import {
  isOutdatedVm,
  maxUnavailableCount,
  type PoolRevision,
  poolRevision,
  type RevisionLookup,
  updatedVm,
  vmiAvailable,
  vmiUpdate,
} from "./pool-revisions.ts";

type Pool = VirtualMachinePool;
type Vm = VirtualMachine;
type Vmi = VirtualMachineInstance;

/** What the updater needs. */
export interface PoolUpdaterDeps {
  readonly revisions: { get(key: ObjectKey): PoolRevision | undefined };
  /** The revisions a pool owns (by owner uid). */
  readonly revisionsOf: (poolUid: string) => PoolRevision[];
  readonly vmis: { get(key: ObjectKey): Vmi | undefined };
  readonly revisionClient: Pick<ResourceClient<PoolRevision>, "create" | "delete">;
  readonly vmClient: Pick<ResourceClient<Vm>, "update" | "delete">;
  readonly vmiClient: Pick<ResourceClient<Vmi>, "delete" | "patch">;
  readonly recorder: EventSink;
  readonly expectations: Expectations;
}

/** The outcome of an update pass. */
export interface UpdateResult {
  /** No VM was outdated (revisions may be pruned). */
  readonly stable: boolean;
  /** maxUnavailable held VMIs back: look again shortly (KubeVirt: 3 s). */
  readonly retry: boolean;
}

/** Keeps a pool's VMs and VMIs at its current template. */
export class PoolUpdater {
  readonly #d: PoolUpdaterDeps;
  constructor(deps: PoolUpdaterDeps) {
    this.#d = deps;
  }

  /** The revision lookup of the pool's namespace. */
  lookup(pool: Pool): RevisionLookup {
    return (name) => this.#d.revisions.get(objectKey(pool.metadata?.namespace, name));
  }

  /** Creates `<pool>-<generation>` unless it exists (KubeVirt `ensureControllerRevision`); returns its name. */
  async ensureRevision(pool: Pool): Promise<string> {
    const revision = poolRevision(pool);
    if (this.lookup(pool)(revision.metadata.name)) return revision.metadata.name;
    const key = keyOf(pool);
    try {
      await this.#d.expectations.creating(key, () => this.#d.revisionClient.create(revision));
    } catch (error) {
      // The cache has not seen it yet: it is there, which is all this needs.
      if (!isAlreadyExists(error)) throw error;
    }
    return revision.metadata.name;
  }

  /** One update pass over the pool's VMs (KubeVirt `update`). */
  async update(pool: Pool, vms: readonly Vm[]): Promise<UpdateResult> {
    if (pool.spec.updateStrategy?.unmanaged) return { stable: true, retry: false };
    const selection = pool.spec.updateStrategy?.proactive?.selectionPolicy;
    const candidates = selection?.selectors ? filterBySelectors(vms, selection.selectors) : [...vms];
    const revision = this.lookup(pool);
    const outdated = candidates.filter((vm) => isOutdatedVm(pool, vm, revision));
    const upToDate = candidates.filter((vm) => !outdated.includes(vm));
    if (outdated.length > 0) await this.#updateVms(pool, outdated);
    let retry = false;
    if (!pool.spec.updateStrategy?.opportunistic) retry = await this.#updateVmis(pool, upToDate, revision);
    return { stable: outdated.length === 0, retry };
  }

  /** Deletes the pool's revisions that neither a VM nor a VMI refers to (KubeVirt `pruneUnusedRevisions`). */
  async prune(pool: Pool, vms: readonly Vm[]): Promise<void> {
    const used = new Set<string>();
    for (const vm of vms) {
      const name = vm.metadata?.labels?.[LABEL.poolRevisionName];
      if (name) used.add(name);
      const vmiName = this.#d.vmis.get(keyOf(vm))?.metadata?.labels?.[LABEL.poolRevisionName];
      if (vmiName) used.add(vmiName);
    }
    for (const r of this.#d.revisionsOf(pool.metadata?.uid ?? "")) {
      if (used.has(r.metadata.name)) continue;
      try {
        await this.#d.revisionClient.delete(r.metadata.namespace ?? "", r.metadata.name);
      } catch (error) {
        if (!isNotFound(error)) throw error;
      }
    }
  }

  async #updateVms(pool: Pool, vms: readonly Vm[]): Promise<void> {
    await this.ensureRevision(pool);
    for (const vm of vms) {
      const { namespace, name } = splitKey(keyOf(vm));
      try {
        await this.#d.vmClient.update(updatedVm(vm, vmFromPool(pool, name)));
      } catch (error) {
        this.#d.recorder.event(
          pool,
          "Warning",
          "FailedUpdate",
          `Error updating virtual machine ${name}/${namespace}: ${error instanceof Error ? error.message : String(error)}`,
        );
        throw error;
      }
      this.#d.recorder.event(pool, "Normal", "SuccessfulUpdate", `Updated VM ${namespace}/${name}`);
    }
  }

  /** Proactive update of the VMIs of up-to-date VMs; returns true when maxUnavailable held some back. */
  async #updateVmis(pool: Pool, vms: readonly Vm[], revision: RevisionLookup): Promise<boolean> {
    // VMIs that are not ready anyway follow first: restarting them costs no availability.
    for (const vm of vms.filter((v) => !vmiAvailable(this.#d.vmis.get(keyOf(v))))) {
      const vmi = this.#d.vmis.get(keyOf(vm));
      if (vmi && !vmi.metadata?.deletionTimestamp) await this.#apply(pool, vm, vmi, vmiUpdate(vm, vmi, revision));
    }
    const unavailable = vms.filter((v) => !vmiAvailable(this.#d.vmis.get(keyOf(v)))).length;
    let budget = maxUnavailableCount(pool) - unavailable;
    for (const vm of vms) {
      const vmi = this.#d.vmis.get(keyOf(vm));
      if (!vmi) continue;
      const what = vmiUpdate(vm, vmi, revision);
      if (what === "none") continue;
      if (budget <= 0) return true;
      await this.#apply(pool, vm, vmi, what);
      budget--;
    }
    return false;
  }

  /** KubeVirt `handleResourceUpdate`. */
  async #apply(pool: Pool, vm: Vm, vmi: Vmi, what: ReturnType<typeof vmiUpdate>): Promise<void> {
    if (what === "none") return;
    const { namespace, name } = splitKey(keyOf(vm));
    try {
      if (what === "restart") await this.#d.vmiClient.delete(namespace, vmi.metadata?.name ?? name);
      else if (what === "vm-delete")
        await this.#d.vmClient.delete(namespace, name, { propagationPolicy: "Foreground" });
      else {
        const labels = {
          ...vmi.metadata?.labels,
          [LABEL.poolRevisionName]: vm.metadata?.labels?.[LABEL.poolRevisionName] ?? "",
        };
        await this.#d.vmiClient.patch(
          namespace,
          vmi.metadata?.name ?? name,
          vmi.metadata?.labels
            ? [
                { op: "test", path: "/metadata/labels", value: vmi.metadata.labels },
                { op: "replace", path: "/metadata/labels", value: labels },
              ]
            : [{ op: "add", path: "/metadata/labels", value: labels }],
        );
      }
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      this.#d.recorder.event(
        pool,
        "Warning",
        "FailedUpdate",
        `Error updating resource ${namespace}/${name}: ${message}`,
      );
      throw error;
    }
    this.#d.recorder.event(pool, "Normal", "SuccessfulDelete", `Successfully updated resource ${namespace}/${name}`);
  }
}
