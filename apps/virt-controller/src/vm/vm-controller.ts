/**
 * The VM controller (KubeVirt `watch/vm`): keeps each VirtualMachine's VMI in line with its run strategy and state
 * change requests, adopts orphaned VMIs of the same name, and writes the VM status. Decisions are in
 * `run-strategy.ts`, the status in `vm-status.ts`; this file does the I/O.
 */
import { keyOf, type ObjectKey, splitKey, type VirtualMachine, type VirtualMachineInstance } from "@kvt/api";
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
import { decideVmAction, type VmAction } from "./run-strategy.ts";
import { computeVmStatus, isOwnedBy } from "./vm-status.ts";
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
    const vm = this.#d.vms.get(key);
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
    const action = syncError ? ({ kind: "none" } as const) : decideVmAction(vm, vmi, now);
    let vmForStatus = vm;
    try {
      vmForStatus = await this.#apply(vm, vmi, action, ctx);
    } catch (error) {
      syncError = {
        reason: error instanceof SyncError ? error.reason : "FailedSync",
        message: String(error instanceof Error ? error.message : error),
      };
    }
    // Right after a create the cache cannot describe the new VMI yet; the reconcile its informer event triggers
    // writes an accurate status (and the VM is spared a write that would only say "Stopped").
    if (action.kind !== "create" || syncError) await this.#writeStatus(vm, vmForStatus, vmi, now, syncError);
    if (syncError) throw new SyncError(syncError.reason, syncError.message);
    return action.kind === "backoff" ? requeueAfter(action.ms) : done();
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
    action: VmAction,
    ctx: ReconcileContext,
  ): Promise<VirtualMachine> {
    const key = keyOf(vm);
    const { namespace, name } = splitKey(key);
    switch (action.kind) {
      case "create": {
        const next = vmiFromVm(vm);
        this.#d.expectations.expectCreations(key, 1);
        try {
          await this.#d.vmiClient.create(next);
        } catch (error) {
          this.#d.expectations.lowerCreations(key);
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
      case "delete": {
        const uid = vmi?.metadata?.uid ?? "";
        this.#d.expectations.expectDeletions(key, [uid]);
        try {
          await this.#d.vmiClient.delete(namespace, name, { preconditions: { uid } });
        } catch (error) {
          this.#d.expectations.lowerDeletions(key, uid);
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
        ctx.logger.info({ vmi: name, reason: action.reason }, "deleted VMI");
        this.#d.recorder.event(
          vm,
          "Normal",
          "SuccessfulDelete",
          `Stopped the virtual machine by deleting the virtual machine instance ${uid}`,
        );
        if (!action.appendStart) return vm;
        const requests = [...(vm.status?.stateChangeRequests ?? []), { action: "Start" as const }];
        return { ...vm, status: { ...vm.status, stateChangeRequests: requests } };
      }
      case "setRunStrategy": {
        await this.#d.vmClient.patch(namespace, name, [
          { op: "test", path: "/metadata/uid", value: vm.metadata?.uid },
          ...(vm.spec.running !== undefined ? [{ op: "remove" as const, path: "/spec/running" }] : []),
          { op: "add", path: "/spec/runStrategy", value: action.runStrategy },
        ]);
        return vm;
      }
      case "backoff":
      case "none":
        return vm;
    }
  }

  async #writeStatus(
    vm: VirtualMachine,
    vmForStatus: VirtualMachine,
    vmi: VirtualMachineInstance | undefined,
    now: number,
    syncError: { reason: string; message: string } | undefined,
  ): Promise<void> {
    const status = computeVmStatus(vmForStatus, vmi, { now, syncError });
    const ops = diffMembers("/status", vm.status, status);
    if (ops.length === 0) return;
    const { namespace, name } = splitKey(keyOf(vm));
    await this.#d.vmClient.patch(namespace, name, ops, "status");
  }
}
