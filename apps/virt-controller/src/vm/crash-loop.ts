/**
 * Crash-loop backoff (KubeVirt vm.go `startFailure`): a VMI that reaches a final phase without ever having been
 * Running counts as a start failure; the next VMI waits `max(10, maxDelay/30) * failCount^2 + rand(0..delay/2)`
 * seconds, capped at 300 s. A VMI that reaches Running clears the record. Applies to Always, RerunOnFailure, Once.
 */
import type { VirtualMachine, VirtualMachineInstance, VirtualMachineStatus } from "@kvt/api";
import { effectiveRunStrategy, isFinal } from "./run-strategy.ts";

/** Cap of the backoff, seconds. */
export const MAX_CRASH_LOOP_DELAY_SECONDS = 300;

type StartFailure = NonNullable<VirtualMachineStatus["startFailure"]>;

/** Backoff seconds after `failCount` consecutive failures; `random` in [0, 1). */
export function crashLoopDelaySeconds(failCount: number, random: number): number {
  const base = Math.max(10, MAX_CRASH_LOOP_DELAY_SECONDS / 30) * failCount * failCount;
  const jitter = Math.floor(random * (base / 2 + 1));
  return Math.min(MAX_CRASH_LOOP_DELAY_SECONDS, base + jitter);
}

function everRan(vmi: VirtualMachineInstance): boolean {
  return (vmi.status?.phaseTransitionTimestamps ?? []).some((t) => t.phase === "Running");
}

/** The VM's next `status.startFailure` given its VMI, at `now` (epoch ms). */
export function nextStartFailure(
  vm: VirtualMachine,
  vmi: VirtualMachineInstance | undefined,
  now: number,
  random: () => number = Math.random,
): StartFailure | undefined {
  const current = vm.status?.startFailure ?? undefined;
  if (!vmi) return current;
  if (vmi.status?.phase === "Running") return undefined;
  const strategy = effectiveRunStrategy(vm);
  if (strategy !== "Always" && strategy !== "RerunOnFailure" && strategy !== "Once") return current;
  if (!isFinal(vmi) || everRan(vmi) || current?.lastFailedVMIUID === vmi.metadata?.uid) return current;
  const count = (current?.consecutiveFailCount ?? 0) + 1;
  const delay = crashLoopDelaySeconds(count, random());
  return {
    consecutiveFailCount: count,
    lastFailedVMIUID: vmi.metadata?.uid ?? "",
    retryAfterTimestamp: new Date(now + delay * 1000).toISOString(),
  };
}
