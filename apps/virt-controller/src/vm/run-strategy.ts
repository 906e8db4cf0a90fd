/**
 * Run-strategy decisions (KubeVirt `pkg/virt-controller/watch/vm/vm.go`, "syncRunStrategy"), pure. Written here
 * because @kvt/api's barrel does not export them yet.
 *
 * | strategy       | no VMI                                             | VMI exists                                     |
 * | -------------- | -------------------------------------------------- | ---------------------------------------------- |
 * | Always         | create (after crash-loop backoff)                  | final, or Stop request for its uid: delete      |
 * | RerunOnFailure | create on a Start request or a strategy change     | Stop(uid): delete; Failed: delete + Start req;  |
 * |                |                                                    | Succeeded: delete                               |
 * | Manual         | create on a Start request                          | Stop request: delete                            |
 * | Halted         | Start request (start --paused): spec -> Always     | delete                                          |
 * | Once           | create                                             | nothing                                         |
 */
import type { RunStrategy, VirtualMachine, VirtualMachineInstance } from "@kvt/api";

/** What the VM controller should do with its VMI. */
export type VmAction =
  | { readonly kind: "none" }
  | { readonly kind: "create" }
  /** Delete the VMI; `appendStart` adds a Start request so RerunOnFailure restarts it. */
  | { readonly kind: "delete"; readonly reason: string; readonly appendStart?: boolean }
  /** Crash-loop backoff: try again after `ms`. */
  | { readonly kind: "backoff"; readonly ms: number }
  /** Halted + Start request: flip `spec.runStrategy` to Always. */
  | { readonly kind: "setRunStrategy"; readonly runStrategy: RunStrategy };

/** The strategy in force: `runStrategy`, else `running` (true = Always, false = Halted), else Halted. */
export function effectiveRunStrategy(vm: VirtualMachine): RunStrategy {
  if (vm.spec.runStrategy) return vm.spec.runStrategy;
  if (vm.spec.running === true) return "Always";
  return "Halted";
}

/** True for Succeeded and Failed. */
export function isFinal(vmi: VirtualMachineInstance | undefined): boolean {
  return vmi?.status?.phase === "Succeeded" || vmi?.status?.phase === "Failed";
}

function firstRequest(vm: VirtualMachine): { action: string; uid?: string } | undefined {
  return vm.status?.stateChangeRequests?.[0];
}

/** True when the first state change request is a Stop aimed at `vmi` (or at no particular VMI). */
export function stopRequestedFor(vm: VirtualMachine, vmi: VirtualMachineInstance): boolean {
  const req = firstRequest(vm);
  return req?.action === "Stop" && (!req.uid || req.uid === vmi.metadata?.uid);
}

function startRequested(vm: VirtualMachine): boolean {
  return firstRequest(vm)?.action === "Start";
}

/** Milliseconds of crash-loop backoff left at `now` (0 when none). */
export function backoffRemainingMs(vm: VirtualMachine, now: number): number {
  const retryAfter = vm.status?.startFailure?.retryAfterTimestamp;
  if (!retryAfter) return 0;
  return Math.max(0, Date.parse(retryAfter) - now);
}

function createOrBackoff(vm: VirtualMachine, now: number): VmAction {
  const ms = backoffRemainingMs(vm, now);
  return ms > 0 ? { kind: "backoff", ms } : { kind: "create" };
}

/** Decides the next action for `vm` given its VMI (undefined = none in the cache) at time `now` (epoch ms). */
export function decideVmAction(vm: VirtualMachine, vmi: VirtualMachineInstance | undefined, now: number): VmAction {
  if (vm.metadata?.deletionTimestamp) {
    // `--cascade=orphan`: the garbage collector releases the VMI; it must survive the VM.
    if (vm.metadata.finalizers?.includes("orphan")) return { kind: "none" };
    return vmi && !vmi.metadata?.deletionTimestamp
      ? { kind: "delete", reason: "VM is being deleted" }
      : { kind: "none" };
  }
  if (vmi?.metadata?.deletionTimestamp) return { kind: "none" }; // fencing: wait until it is gone
  const strategy = effectiveRunStrategy(vm);
  switch (strategy) {
    case "Always":
      if (!vmi) return createOrBackoff(vm, now);
      if (stopRequestedFor(vm, vmi)) return { kind: "delete", reason: "restart requested" };
      if (isFinal(vmi)) return { kind: "delete", reason: `VMI ${vmi.status?.phase}; restarting` };
      return { kind: "none" };
    case "RerunOnFailure":
      if (!vmi) {
        // status.runStrategy records the strategy of the last VMI; a new or switched-to RerunOnFailure starts once.
        const changed = vm.status?.runStrategy !== strategy;
        return startRequested(vm) || changed ? createOrBackoff(vm, now) : { kind: "none" };
      }
      if (stopRequestedFor(vm, vmi)) return { kind: "delete", reason: "stop requested" };
      if (vmi.status?.phase === "Failed") return { kind: "delete", reason: "VMI Failed; rerunning", appendStart: true };
      if (vmi.status?.phase === "Succeeded") return { kind: "delete", reason: "VMI Succeeded" };
      return { kind: "none" };
    case "Manual":
      if (vmi && stopRequestedFor(vm, vmi)) return { kind: "delete", reason: "stop requested" };
      if (!vmi && startRequested(vm)) return createOrBackoff(vm, now);
      return { kind: "none" };
    case "Halted":
      if (vmi) return { kind: "delete", reason: "runStrategy Halted" };
      if (startRequested(vm)) return { kind: "setRunStrategy", runStrategy: "Always" };
      return { kind: "none" };
    case "Once":
      return vmi ? { kind: "none" } : createOrBackoff(vm, now);
  }
}
