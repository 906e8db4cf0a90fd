/** `migrationState.migrationConfiguration` (KubeVirt units) -> launcher-rpc MigrateRequestOptions (bytes, seconds). */
import { type MigrationConfiguration, tryParseQuantity } from "@kvt/api";
import { KUBEVIRT_MIGRATION_DEFAULTS, type MigrateRequestOptions } from "@kvt/launcher-rpc";

/** KubeVirt's defaults (virt-config.go). */
export const MIGRATION_DEFAULTS: MigrateRequestOptions = KUBEVIRT_MIGRATION_DEFAULTS;

/** The options a source launcher migrates with; unset or unparsable knobs fall back to the defaults. */
export function migrationOptionsOf(cfg: MigrationConfiguration | undefined): MigrateRequestOptions {
  const bandwidth = tryParseQuantity(cfg?.bandwidthPerMigration)?.toNumber();
  const maxDowntime = cfg?.maxDowntimeMs;
  return {
    bandwidthBytesPerSec: bandwidth !== undefined && bandwidth >= 0 ? Math.floor(bandwidth) : 0,
    maxDowntimeMs:
      maxDowntime !== undefined && maxDowntime >= 1 && maxDowntime <= 2_000_000
        ? maxDowntime
        : MIGRATION_DEFAULTS.maxDowntimeMs,
    allowAutoConverge: cfg?.allowAutoConverge ?? false,
    allowPostCopy: cfg?.allowPostCopy ?? false,
    completionTimeoutPerGiB: positive(cfg?.completionTimeoutPerGiB) ?? MIGRATION_DEFAULTS.completionTimeoutPerGiB,
    progressTimeoutSeconds: positive(cfg?.progressTimeout) ?? MIGRATION_DEFAULTS.progressTimeoutSeconds,
    ...(cfg?.disableTLS === true ? { disableTLS: true } : {}),
  };
}

function positive(value: number | undefined): number | undefined {
  return value !== undefined && Number.isFinite(value) && value > 0 ? value : undefined;
}
