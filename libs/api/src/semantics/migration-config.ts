/**
 * The migration configuration: KubeVirt's cluster defaults, and MigrationPolicy matching and application
 * (KubeVirt `virt-config.go`, `watch/migration/migrationpolicy.go`).
 *
 * Matching: a policy matches when every label in its VMI selector is on the VMI and every label in its namespace
 * selector is on the namespace. The best match has the most matching labels (VMI + namespace); ties go to more VMI
 * labels, then to the lexicographically smallest policy name. Its non-nil fields override the cluster values.
 */
import { tryParseQuantity } from "../quantity.ts";
import type { MigrationConfiguration, MigrationPolicy, VirtualMachineInstance } from "../types.ts";

/** Cluster migration settings with every field resolved. */
export type ResolvedMigrationConfiguration = Required<
  Omit<MigrationConfiguration, "network" | "matchSELinuxLevelOnMigration" | "experimental">
> &
  Pick<MigrationConfiguration, "network" | "matchSELinuxLevelOnMigration" | "experimental">;

/** KubeVirt's defaults (`DefaultMigrationConfiguration`). */
export const DEFAULT_MIGRATION_CONFIGURATION: Readonly<ResolvedMigrationConfiguration> = Object.freeze({
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
  utilityVolumesTimeout: 150,
});

/** The cluster configuration: KubeVirt's defaults overlaid with what the admin set (`allowWorkloadDisruption` follows `allowPostCopy` when unset). */
export function clusterMigrationConfiguration(configured: MigrationConfiguration = {}): ResolvedMigrationConfiguration {
  const set = Object.fromEntries(Object.entries(configured).filter(([, v]) => v !== undefined && v !== null));
  const out = { ...DEFAULT_MIGRATION_CONFIGURATION, ...set } as ResolvedMigrationConfiguration;
  if (configured.allowWorkloadDisruption === undefined) out.allowWorkloadDisruption = out.allowPostCopy;
  return out;
}

interface Score {
  vmi: number;
  ns: number;
}

function score(
  policy: MigrationPolicy,
  vmiLabels: Record<string, string> | undefined,
  nsLabels: Record<string, string> | undefined,
): Score | undefined {
  const sel = policy.spec?.selectors;
  if (!sel) return undefined;
  const count = (want: Record<string, string>, have: Record<string, string> | undefined): number | undefined => {
    let n = 0;
    for (const [k, v] of Object.entries(want)) {
      if (have?.[k] !== v) return undefined;
      n++;
    }
    return n;
  };
  let vmi = 0;
  let ns = 0;
  if (sel.virtualMachineInstanceSelector && vmiLabels) {
    const c = count(sel.virtualMachineInstanceSelector, vmiLabels);
    if (c === undefined) return undefined;
    vmi = c;
  }
  // KubeVirt checks the namespace selector only when the VMI has labels (its nil check uses the VMI's labels).
  if (sel.namespaceSelector && vmiLabels) {
    const c = count(sel.namespaceSelector, nsLabels ?? {});
    if (c === undefined) return undefined;
    ns = c;
  }
  return { vmi, ns };
}

const greater = (a: Score, b: Score): boolean =>
  a.vmi + a.ns === b.vmi + b.ns ? a.vmi > b.vmi : a.vmi + a.ns > b.vmi + b.ns;

/** The policy that applies to a VMI with `vmiLabels` in a namespace with `namespaceLabels`, or undefined. */
export function matchMigrationPolicy(
  policies: readonly MigrationPolicy[],
  vmiLabels: Record<string, string> | undefined,
  namespaceLabels: Record<string, string> | undefined,
): MigrationPolicy | undefined {
  let best: Score = { vmi: 0, ns: 0 };
  let matching: MigrationPolicy[] = [];
  for (const policy of policies) {
    const s = score(policy, vmiLabels, namespaceLabels);
    if (!s) continue;
    if (greater(s, best)) {
      best = s;
      matching = [policy];
    } else if (!greater(best, s)) {
      matching.push(policy);
    }
  }
  let winner: MigrationPolicy | undefined;
  for (const p of matching) if (!winner || (p.metadata?.name ?? "") < (winner.metadata?.name ?? "")) winner = p;
  return winner;
}

/** The cluster configuration with the policy's set fields applied (`applyMigrationPolicySpec`). */
export function applyMigrationPolicy(
  base: ResolvedMigrationConfiguration,
  policy: MigrationPolicy | undefined,
): ResolvedMigrationConfiguration {
  const out = { ...base };
  const spec = policy?.spec;
  if (!spec) return out;
  if (spec.allowWorkloadDisruption === undefined && spec.allowPostCopy !== undefined)
    out.allowWorkloadDisruption = spec.allowPostCopy;
  if (spec.allowAutoConverge !== undefined) out.allowAutoConverge = spec.allowAutoConverge;
  if (spec.bandwidthPerMigration !== undefined) out.bandwidthPerMigration = spec.bandwidthPerMigration;
  if (spec.completionTimeoutPerGiB !== undefined) out.completionTimeoutPerGiB = spec.completionTimeoutPerGiB;
  if (spec.maxDowntimeMs !== undefined) out.maxDowntimeMs = spec.maxDowntimeMs;
  if (spec.allowPostCopy !== undefined) out.allowPostCopy = spec.allowPostCopy;
  if (spec.allowWorkloadDisruption !== undefined) out.allowWorkloadDisruption = spec.allowWorkloadDisruption;
  return out;
}

/**
 * What goes into `vmi.status.migrationState.migrationConfiguration` and `migrationPolicyName` for a migration:
 * the cluster configuration, overridden by the best matching policy.
 */
export function resolveMigrationConfiguration(
  cluster: ResolvedMigrationConfiguration,
  policies: readonly MigrationPolicy[],
  vmiLabels: Record<string, string> | undefined,
  namespaceLabels: Record<string, string> | undefined,
): { configuration: ResolvedMigrationConfiguration; policyName?: string } {
  const policy = matchMigrationPolicy(policies, vmiLabels, namespaceLabels);
  const configuration = applyMigrationPolicy(cluster, policy);
  return policy?.metadata?.name ? { configuration, policyName: policy.metadata.name } : { configuration };
}

/**
 * The data a migration moves, in units of 10^9 bytes rounded up (KubeVirt `getVMIMigrationDataSize`: the guest
 * memory, memory.guest over requests.memory, plus `extraBytes` for block-migrated disks; note the decimal Giga
 * despite the knob's "PerGiB" name).
 */
export function migrationDataSizeGiga(vmi: VirtualMachineInstance, extraBytes = 0n): bigint {
  const raw = vmi.spec?.domain?.memory?.guest ?? vmi.spec?.domain?.resources?.requests?.memory;
  const memory = tryParseQuantity(raw)?.value() ?? 0n;
  const total = memory + extraBytes;
  const giga = 1_000_000_000n;
  return total <= 0n ? 0n : (total + giga - 1n) / giga;
}

/**
 * Seconds a migration may take before the completion timeout fires (`acceptableCompletionTime`):
 * completionTimeoutPerGiB x the data size; 0 means "never" (no memory known).
 */
export function acceptableCompletionTimeSeconds(
  vmi: VirtualMachineInstance,
  config: Pick<ResolvedMigrationConfiguration, "completionTimeoutPerGiB">,
  extraBytes = 0n,
): number {
  return Number(BigInt(config.completionTimeoutPerGiB) * migrationDataSizeGiga(vmi, extraBytes));
}
