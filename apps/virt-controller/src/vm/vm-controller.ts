/**
 * The VM controller (KubeVirt `watch/vm`): keeps each VirtualMachine's VMI in line with its run strategy and state
 * change requests, adopts orphaned VMIs of the same name, and writes the VM status. The decision is @kvt/api's
 * `planVmRun` (KubeVirt `syncRunStrategy`), the status is `vm-status.ts`; this file does the I/O.
 */
import {
  keyOf,
  type ObjectKey,
  planVmRun,
  splitKey,
  type VirtualMachine,
  type VirtualMachineInstance,
  type VmRunAction,
} from "@kvt/api";
import {
  diffMembers,
  done,
  type EventSink,
  type Expectations,
  type InformerHandlers,
  isNotFound,
  type ReconcileContext,
  type Reconciler,
  type ResourceClient,
  type Result,
  requeueAfter,
  SyncError,
} from "@kvt/kube";
import type { InstancetypeSync, PinnedSpecs } from "./instancetype-sync.ts";
import { computeVmStatus, isOwnedBy, type VmStatusInput } from "./vm-status.ts";
import { vmiFromVm } from "./vmi-template.ts";

/** What the VM controller needs. */
export interface VmControllerDeps {
  readonly vms: { get(key: ObjectKey): VirtualMachine | undefined };
  readonly vmis: { get(key: ObjectKey): VirtualMachineInstance | undefined };
  readonly vmClient: Pick<ResourceClient<VirtualMachine>, "patch">;
  readonly vmiClient: Pick<ResourceClient<VirtualMachineInstance>, "create" | "delete" | "patch">;
  readonly recorder: EventSink;
  /** VMI creations/deletions per VM key. */
  readonly expectations: Expectations;
  readonly now?: () => number;
  /** Instancetype/preference pinning and expansion; without it, VMs that reference one are created unexpanded. */
  readonly instancetypes?: InstancetypeSync;
}

/** Reconciles VirtualMachines. */
export class VmController implements Reconciler {
  readonly #d: VmControllerDeps;
  constructor(deps: VmControllerDeps) {
    this.#d = deps;
  }

  /** Informer handlers: VM changes enqueue the VM; VMI changes lower expectations and enqueue the VM of the same name. */
  handlers(enqueue: (key: ObjectKey) => void): {
    vm: InformerHandlers<VirtualMachine>;
    vmi: InformerHandlers<VirtualMachineInstance>;
  } {
    const e = this.#d.expectations;
    return {
      vm: {
        onAdd: (vm) => enqueue(keyOf(vm)),
        onUpdate: (_o, vm) => enqueue(keyOf(vm)),
        onDelete: (vm) => enqueue(keyOf(vm)),
      },
      vmi: {
        onAdd: (vmi) => {
          e.creationObserved(keyOf(vmi));
          enqueue(keyOf(vmi));
        },
        onUpdate: (_o, vmi) => enqueue(keyOf(vmi)),
        onDelete: (vmi) => {
          e.deletionObserved(keyOf(vmi), vmi.metadata?.uid);
          enqueue(keyOf(vmi));
        },
      },
    };
  }

  async reconcile(key: ObjectKey, ctx: ReconcileContext): Promise<Result> {
    let vm = this.#d.vms.get(key);
    if (!vm) {
      this.#d.expectations.delete(key);
      return done();
    }
    // The cache has not seen our last create/delete yet: the informer handler re-enqueues when it does.
    if (!this.#d.expectations.satisfied(key)) return done();
    const now = (this.#d.now ?? Date.now)();
    let vmi = this.#d.vmis.get(key);
    let syncError: { reason: string; message: string } | undefined;
    if (vmi && !isOwnedBy(vmi, vm)) {
      const adopted = await this.#adopt(vm, vmi, ctx).catch((error: unknown) => {
        syncError = { reason: "FailedAdopt", message: `Cannot adopt VMI ${vmi?.metadata?.name}: ${String(error)}` };
        return undefined;
      });
      vmi = adopted;
    }
    let pinned: PinnedSpecs | undefined;
    // A VM being deleted creates no VMI, so it needs no pinned revision (and must not get a new one).
    const expands = !vm.metadata?.deletionTimestamp && (vm.spec.instancetype || vm.spec.preference);
    if (!syncError && this.#d.instancetypes && expands) {
      try {
        pinned = await this.#d.instancetypes.sync(vm);
        vm = pinned.vm;
      } catch (error) {
        syncError = {
          reason: error instanceof SyncError ? error.reason : "FailedCreate",
          message: error instanceof Error ? error.message : String(error),
        };
      }
    }
    const action: VmRunAction = syncError ? { action: "none" } : planVmRun(vm, vmi, new Date(now));
    let vmForStatus = vm;
    try {
      vmForStatus = await this.#apply(vm, vmi, action, ctx, pinned);
    } catch (error) {
      syncError = {
        reason: error instanceof SyncError ? error.reason : "FailedSync",
        message: String(error instanceof Error ? error.message : error),
      };
    }
    // Right after a create the cache cannot describe the new VMI yet; the reconcile its informer event triggers
    // writes an accurate status (and the VM is spared a write that would only say "Stopped").
    if (action.action !== "createVmi" || syncError) {
      // A deletion asked for and not yet observed is KubeVirt's "stop expected": printableStatus Stopping.
      const stopExpected = action.action === "deleteVmi" && !this.#d.expectations.satisfied(key);
      await this.#writeStatus(vm, vmForStatus, vmi, { now, syncError, stopExpected });
    }
    if (syncError) throw new SyncError(syncError.reason, syncError.message);
    return action.action === "waitBackoff" ? requeueAfter(action.seconds * 1000) : done();
  }

  /** Takes controller ownership of an orphan VMI of the same name; leaves VMIs owned by another controller alone. */
  async #adopt(
    vm: VirtualMachine,
    vmi: VirtualMachineInstance,
    ctx: ReconcileContext,
  ): Promise<VirtualMachineInstance | undefined> {
    const refs = vmi.metadata?.ownerReferences ?? [];
    if (refs.some((r) => r.controller)) {
      ctx.logger.warn({ vmi: vmi.metadata?.name }, "VMI is controlled by another owner; not touching it");
      throw new SyncError("FailedAdopt", `VMI ${vmi.metadata?.name} is controlled by another owner`);
    }
    if (vm.metadata?.deletionTimestamp || vmi.metadata?.deletionTimestamp) return undefined;
    const { namespace, name } = splitKey(keyOf(vmi));
    const owner = vmiFromVm(vm).metadata!.ownerReferences![0];
    const ops = vmi.metadata?.ownerReferences
      ? [
          { op: "test" as const, path: "/metadata/ownerReferences", value: vmi.metadata.ownerReferences },
          { op: "add" as const, path: "/metadata/ownerReferences/-", value: owner },
        ]
      : [{ op: "add" as const, path: "/metadata/ownerReferences", value: [owner] }];
    const adopted = await this.#d.vmiClient.patch(namespace, name, [
      { op: "test", path: "/metadata/uid", value: vmi.metadata?.uid },
      ...ops,
    ]);
    ctx.logger.info({ vmi: name }, "adopted orphaned VMI");
    return adopted;
  }

  /** Carries out `action`; returns the VM as the status computation should see it. */
  async #apply(
    vm: VirtualMachine,
    vmi: VirtualMachineInstance | undefined,
    action: VmRunAction,
    ctx: ReconcileContext,
    pinned?: PinnedSpecs,
  ): Promise<VirtualMachine> {
    const key = keyOf(vm);
    const { namespace, name } = splitKey(key);
    switch (action.action) {
      case "createVmi": {
        const next = vmiFromVm(vm);
        if (pinned) this.#d.instancetypes?.expand(vm, next, pinned);
        try {
          await this.#d.expectations.creating(key, () => this.#d.vmiClient.create(next));
        } catch (error) {
          this.#d.recorder.event(
            vm,
            "Warning",
            "FailedCreate",
            `Error creating virtual machine instance: ${String(error)}`,
          );
          throw new SyncError("FailedCreate", `Error creating virtual machine instance: ${String(error)}`, {
            cause: error,
          });
        }
        ctx.logger.info({ vmi: name }, "created VMI");
        this.#d.recorder.event(
          vm,
          "Normal",
          "SuccessfulCreate",
          `Started the virtual machine by creating the new virtual machine instance ${name}`,
        );
        return vm;
      }
      case "deleteVmi": {
        const uid = vmi?.metadata?.uid ?? "";
        try {
          await this.#d.expectations.deleting(key, uid, () =>
            this.#d.vmiClient.delete(namespace, name, { preconditions: { uid } }),
          );
        } catch (error) {
          if (isNotFound(error)) return vm;
          this.#d.recorder.event(
            vm,
            "Warning",
            "FailedDelete",
            `Error deleting virtual machine instance ${name}: ${String(error)}`,
          );
          throw new SyncError("FailedDelete", `Error deleting virtual machine instance: ${String(error)}`, {
            cause: error,
          });
        }
        ctx.logger.info({ vmi: name, phase: vmi?.status?.phase ?? "" }, "deleted VMI");
        this.#d.recorder.event(
          vm,
          "Normal",
          "SuccessfulDelete",
          `Stopped the virtual machine by deleting the virtual machine instance ${uid}`,
        );
        // RerunOnFailure: a Failed VMI reruns through a Start request, written with this reconcile's status.
        if (!action.thenRequestStart) return vm;
        const requests = [...(vm.status?.stateChangeRequests ?? []), { action: "Start" as const }];
        return { ...vm, status: { ...vm.status, stateChangeRequests: requests } };
      }
      case "setRunStrategyAlways": {
        await this.#d.vmClient.patch(namespace, name, [
          { op: "test", path: "/metadata/uid", value: vm.metadata?.uid },
          ...(vm.spec.running !== undefined ? [{ op: "remove" as const, path: "/spec/running" }] : []),
          { op: "add", path: "/spec/runStrategy", value: "Always" },
        ]);
        return vm;
      }
      case "invalid":
        // KubeVirt reports a VM whose strategy cannot be read (running and runStrategy both set) as a sync error.
        throw new SyncError("FailedCreate", `Error fetching RunStrategy: ${action.message}`);
      case "waitBackoff":
      case "none":
        return vm;
    }
  }

  async #writeStatus(
    vm: VirtualMachine,
    vmForStatus: VirtualMachine,
    vmi: VirtualMachineInstance | undefined,
    input: VmStatusInput,
  ): Promise<void> {
    const status = computeVmStatus(vmForStatus, vmi, input);
    const ops = diffMembers("/status", vm.status, status);
    if (ops.length === 0) return;
    const { namespace, name } = splitKey(keyOf(vm));
    await this.#d.vmClient.patch(namespace, name, ops, "status");
  }
}
