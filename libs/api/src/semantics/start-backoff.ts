/**
 * Crash-loop backoff for VMs (KubeVirt `vm.go` start-failure tracking): a VMI that ends (Succeeded or Failed)
 * without ever reaching Running counts as a start failure; the next start waits
 *
 *   delay = min(maxDelay, max(10, maxDelay / 30) x failCount^2 + rand(delay/2 + 1))      maxDelay = 300 s
 *
 * and any VMI that reaches Running (or a strategy that does not restart: Manual, Halted) clears the count.
 */
import type { VirtualMachine, VirtualMachineInstance, VirtualMachineStatus } from "../types.ts";
import { isVmiFinal, runStrategyOf } from "./vm-state.ts";

/** KubeVirt's cap on the crash-loop delay, in seconds. */
export const MAX_CRASH_LOOP_BACKOFF_SECONDS = 300;

/** `rand.Intn(n)`: an integer in [0, n). Injected so tests are deterministic. */
export type RandomInt = (n: number) => number;

const defaultRandom: RandomInt = (n) => Math.floor(Math.random() * n);

/** Seconds to wait before the next start after `failCount` consecutive start failures (`calculateStartBackoffTime`). */
export function startBackoffSeconds(
  failCount: number,
  maxDelay = MAX_CRASH_LOOP_BACKOFF_SECONDS,
  random: RandomInt = defaultRandom,
): number {
  const count = failCount <= 0 ? 1 : failCount;
  const interval = Math.max(10, Math.trunc(maxDelay / 30));
  let delay = interval * count * count;
  delay += random(Math.trunc(delay / 2) + 1);
  return Math.min(delay, maxDelay);
}

/** The VMI reached Running at some point (it has a Running phase transition). */
export function wasVmiRunning(vmi: VirtualMachineInstance | undefined): boolean {
  return vmi?.status?.phaseTransitionTimestamps?.some((t) => t.phase === "Running") ?? false;
}

/** The VMI ended without ever running: a start failure. */
export function vmiFailedEarly(vmi: VirtualMachineInstance | undefined): boolean {
  return vmi !== undefined && isVmiFinal(vmi) && !wasVmiRunning(vmi);
}

/**
 * The new `status.startFailure` (`syncStartFailureStatus`): undefined to clear it, the same object when this VMI
 * was already counted, or a new record with the next retry time.
 */
export function nextStartFailure(
  vm: VirtualMachine,
  vmi: VirtualMachineInstance | undefined,
  now: Date,
  random: RandomInt = defaultRandom,
): VirtualMachineStatus["startFailure"] {
  const current = vm.status?.startFailure ?? undefined;
  let strategy: string;
  try {
    strategy = runStrategyOf(vm);
  } catch {
    // Invalid VM: leave the record as it is (KubeVirt logs and keeps it).
    return current;
  }
  if (wasVmiRunning(vmi) || (strategy !== "Always" && strategy !== "RerunOnFailure" && strategy !== "Once"))
    return undefined;
  if (!vmi || !vmiFailedEarly(vmi)) return current;
  if (current && current.lastFailedVMIUID === vmi.metadata?.uid) return current;
  const count = (current?.consecutiveFailCount ?? 0) + 1;
  const delay = startBackoffSeconds(count, MAX_CRASH_LOOP_BACKOFF_SECONDS, random);
  const retryAfter = new Date(now.getTime() + delay * 1000).toISOString().replace(/\.\d+Z$/, "Z");
  return { consecutiveFailCount: count, lastFailedVMIUID: vmi.metadata?.uid ?? "", retryAfterTimestamp: retryAfter };
}

/** Whole seconds left before the VM may start again (0 when it may start now). */
export function startBackoffRemainingSeconds(vm: VirtualMachine, now: Date): number {
  const at = vm.status?.startFailure?.retryAfterTimestamp;
  if (!at) return 0;
  const diff = Math.floor(Date.parse(at) / 1000) - Math.floor(now.getTime() / 1000);
  return Math.max(diff, 0);
}
