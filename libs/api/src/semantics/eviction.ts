/**
 * What an eviction means for a VMI (KubeVirt `pkg/util/migrations`): its eviction strategy (its own, else the
 * cluster's from the KubeVirt CR's `spec.configuration.evictionStrategy`), whether it can live-migrate now (its
 * LiveMigratable condition), and whether an eviction should move it by a migration (LiveMigrate always,
 * LiveMigrateIfPossible when it can; None and External never: External leaves the move to someone else).
 */
import type { EVICTION_STRATEGIES } from "../constants.ts";
import { VMI_CONDITION } from "../constants.ts";
import type { KubeVirtConfiguration, VirtualMachineInstance } from "../types.ts";

/** An eviction strategy (`spec.evictionStrategy`, `spec.configuration.evictionStrategy`). */
export type EvictionStrategy = (typeof EVICTION_STRATEGIES)[number];

/** The VMI's eviction strategy: its own, else the cluster's (KubeVirt `VMIEvictionStrategy`); undefined when neither. */
export function vmiEvictionStrategy(
  vmi: VirtualMachineInstance,
  config: Pick<KubeVirtConfiguration, "evictionStrategy"> | undefined,
): EvictionStrategy | undefined {
  return vmi.spec?.evictionStrategy ?? (config?.evictionStrategy as EvictionStrategy);
}

/** True when the VMI's LiveMigratable condition is True (KubeVirt `IsMigratable`). */
export function isMigratable(vmi: VirtualMachineInstance): boolean {
  return !!vmi.status?.conditions?.some((c) => c.type === VMI_CONDITION.LiveMigratable && c.status === "True");
}

/** True when an eviction should live-migrate the VMI (KubeVirt `VMIMigratableOnEviction`). */
export function migratableOnEviction(
  vmi: VirtualMachineInstance,
  config: Pick<KubeVirtConfiguration, "evictionStrategy"> | undefined,
): boolean {
  const strategy = vmiEvictionStrategy(vmi, config);
  return strategy === "LiveMigrate" || (strategy === "LiveMigrateIfPossible" && isMigratable(vmi));
}
