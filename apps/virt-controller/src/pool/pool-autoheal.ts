/**
 * Pool autohealing (pure), after KubeVirt's `watch/pool` (`spec.autohealing`): a VM of the pool that keeps failing to
 * start is deleted so that scale-out replaces it with a fresh one.
 *
 * ```
 *   failing <=> status.startFailure.consecutiveFailCount >= startUpFailureThreshold (default 3)
 *            or printableStatus in {CrashLoopBackOff, ErrorUnschedulable, DataVolumeError, ErrorPvcNotFound,
 *               ErrImagePull, ImagePullBackOff} and Ready=False for at least minFailingToStartDuration (default 5m)
 * ```
 * KubeVirt measures "Ready=False since" from the condition's lastProbeTime; where that is unset, this reads
 * lastTransitionTime (the moment the field's documentation names).
 */
import { findCondition, parseGoDuration, type VirtualMachine, type VirtualMachinePool, VM_CONDITION } from "@kvt/api";

/** Default `startUpFailureThreshold`. */
export const DEFAULT_STARTUP_FAILURE_THRESHOLD = 3;
/** Default `minFailingToStartDuration`: 5 minutes. */
export const DEFAULT_MIN_FAILING_MS = 5 * 60_000;

const FAILING_STATUSES: ReadonlySet<string> = new Set([
  "CrashLoopBackOff",
  "ErrorUnschedulable",
  "DataVolumeError",
  "ErrorPvcNotFound",
  "ErrImagePull",
  "ImagePullBackOff",
]);

/** The pool's VMs that autohealing replaces now (empty when `spec.autohealing` is unset). */
export function failingVms(pool: VirtualMachinePool, vms: readonly VirtualMachine[], now: number): VirtualMachine[] {
  const healing = pool.spec.autohealing;
  if (!healing) return [];
  const threshold = healing.startUpFailureThreshold ?? DEFAULT_STARTUP_FAILURE_THRESHOLD;
  const minMs =
    healing.minFailingToStartDuration !== undefined
      ? (parseGoDuration(healing.minFailingToStartDuration) ?? DEFAULT_MIN_FAILING_MS)
      : DEFAULT_MIN_FAILING_MS;
  return vms.filter((vm) => {
    if ((vm.status?.startFailure?.consecutiveFailCount ?? 0) >= threshold) return true;
    if (!FAILING_STATUSES.has(vm.status?.printableStatus ?? "")) return false;
    const ready = findCondition(vm.status?.conditions, VM_CONDITION.Ready);
    if (ready?.status !== "False") return false;
    const since = Date.parse(ready.lastProbeTime ?? ready.lastTransitionTime ?? "") || 0;
    return now - since >= minMs;
  });
}
