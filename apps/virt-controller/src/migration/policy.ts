/**
 * MigrationPolicy resolution (pure; KubeVirt `watch/migration/migrationpolicy.go`) and the effective migration
 * configuration written to `vmi.status.migrationState.migrationConfiguration`.
 *
 * A policy matches when every label in its namespaceSelector is on the VMI's namespace and every label in its
 * virtualMachineInstanceSelector is on the VMI. The policy matching the most labels wins; ties go to the one
 * matching more VMI labels, then to the lexicographically smallest name. Its non-nil fields override the cluster
 * configuration; a policy that sets allowPostCopy but not allowWorkloadDisruption gets the latter copied from it.
 */
import type { MigrationConfiguration, MigrationPolicy } from "@kvt/api";

/** KubeVirt's cluster defaults (`pkg/virt-config/virt-config.go`). */
export const DEFAULT_MIGRATION_CONFIGURATION: Readonly<MigrationConfiguration> = {
  parallelMigrationsPerCluster: 5,
  parallelOutboundMigrationsPerNode: 2,
  bandwidthPerMigration: "0Mi",
  completionTimeoutPerGiB: 150,
  progressTimeout: 150,
  unsafeMigrationOverride: false,
  allowAutoConverge: false,
  allowPostCopy: false,
  allowWorkloadDisruption: false,
  maxDowntimeMs: 900,
  disableTLS: false,
  nodeDrainTaintKey: "kubevirt.io/drain",
};

function matches(selector: Record<string, string> | undefined, labels: Record<string, string>): number | undefined {
  let n = 0;
  for (const [k, v] of Object.entries(selector ?? {})) {
    if (labels[k] !== v) return undefined;
    n++;
  }
  return n;
}

/** The winning policy for a VMI with `vmiLabels` in a namespace with `namespaceLabels`, if any. */
export function matchPolicy(
  policies: readonly MigrationPolicy[],
  vmiLabels: Record<string, string>,
  namespaceLabels: Record<string, string>,
): MigrationPolicy | undefined {
  let best: { p: MigrationPolicy; total: number; vmi: number } | undefined;
  for (const p of policies) {
    const ns = matches(p.spec.selectors.namespaceSelector, namespaceLabels);
    const vmi = matches(p.spec.selectors.virtualMachineInstanceSelector, vmiLabels);
    if (ns === undefined || vmi === undefined) continue;
    const total = ns + vmi;
    const name = p.metadata?.name ?? "";
    if (
      !best ||
      total > best.total ||
      (total === best.total && vmi > best.vmi) ||
      (total === best.total && vmi === best.vmi && name < (best.p.metadata?.name ?? ""))
    ) {
      best = { p, total, vmi };
    }
  }
  return best?.p;
}

/** The cluster configuration with the policy's overrides applied. */
export function effectiveConfiguration(
  cluster: Readonly<MigrationConfiguration>,
  policy: MigrationPolicy | undefined,
): MigrationConfiguration {
  const out: MigrationConfiguration = { ...cluster };
  if (!policy) return out;
  const s = policy.spec;
  if (s.allowAutoConverge !== undefined) out.allowAutoConverge = s.allowAutoConverge;
  if (s.bandwidthPerMigration !== undefined) out.bandwidthPerMigration = s.bandwidthPerMigration;
  if (s.completionTimeoutPerGiB !== undefined) out.completionTimeoutPerGiB = s.completionTimeoutPerGiB;
  if (s.maxDowntimeMs !== undefined) out.maxDowntimeMs = s.maxDowntimeMs;
  if (s.allowPostCopy !== undefined) out.allowPostCopy = s.allowPostCopy;
  if (s.allowWorkloadDisruption !== undefined) out.allowWorkloadDisruption = s.allowWorkloadDisruption;
  else if (s.allowPostCopy !== undefined) out.allowWorkloadDisruption = s.allowPostCopy;
  return out;
}
