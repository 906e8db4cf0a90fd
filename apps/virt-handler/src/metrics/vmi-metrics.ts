/**
 * Per-VMI series, which only virt-handler exports (KubeVirt's names, labels namespace/name/node), read from the
 * launchers' latest reports at scrape time, so there is nothing to keep in sync:
 *
 *   kubevirt_vmi_migration_data_processed_bytes   bytes sent so far by this node's migration source
 *   kubevirt_vmi_migration_data_remaining_bytes   bytes still to send
 *   kubevirt_vmi_migration_dirty_memory_rate_bytes  guest dirty rate (bytes/s)
 *   kubevirt_vmi_migration_memory_transfer_rate_bytes  transfer rate (bytes/s)
 *   kubevirt_vmi_migration_last_downtime_seconds  downtime of the last completed migration out of this node
 *                                                 (ours; KubeVirt has no downtime metric yet, PR #17974)
 */
import type { DomainInfo } from "@kvt/launcher-rpc";
import { Gauge, type Registry } from "@kvt/observability";

/** Where the metrics read from. */
export interface VmiMetricsSource {
  readonly nodeName: string;
  /** The latest report of each launcher on this node (those that exited are kept a while: last downtime). */
  reports(): DomainInfo[];
}

type Pick = (info: DomainInfo) => number | undefined;

const SERIES: readonly [string, string, Pick][] = [
  [
    "kubevirt_vmi_migration_data_processed_bytes",
    "Bytes of guest memory the migration source has sent so far.",
    (i) => i.migration?.progress?.processedBytes,
  ],
  [
    "kubevirt_vmi_migration_data_remaining_bytes",
    "Bytes of guest memory the migration source still has to send.",
    (i) => i.migration?.progress?.remainingBytes,
  ],
  [
    "kubevirt_vmi_migration_dirty_memory_rate_bytes",
    "Rate at which the guest dirties memory during its migration, in bytes per second.",
    (i) => i.migration?.progress?.dirtyRateBytesPerSec,
  ],
  [
    "kubevirt_vmi_migration_memory_transfer_rate_bytes",
    "Rate at which guest memory is sent to the migration target, in bytes per second.",
    (i) => i.migration?.progress?.transferRateBytesPerSec,
  ],
  [
    "kubevirt_vmi_migration_progress_ratio",
    "Progress of the running migration from 0 to 1 (processed / (processed + remaining)).",
    (i) => {
      const p = i.migration?.progress;
      if (!p) return undefined;
      const total = p.processedBytes + p.remainingBytes;
      return total > 0 ? p.processedBytes / total : 0;
    },
  ],
  [
    "kubevirt_vmi_migration_expected_completion_seconds",
    "Expected seconds until the running migration completes at the current transfer rate.",
    (i) => {
      const p = i.migration?.progress;
      if (!p || p.transferRateBytesPerSec <= 0) return undefined;
      return p.remainingBytes / p.transferRateBytesPerSec + p.expectedDowntimeMs / 1000;
    },
  ],
  [
    "kubevirt_vmi_migration_iterations",
    "Pre-copy iterations done so far by the running migration.",
    (i) => i.migration?.progress?.iteration,
  ],
  [
    "kubevirt_vmi_migration_autoconverge_throttle_ratio",
    "vCPU throttle applied by auto-converge to the migrating guest, from 0 to 1.",
    (i) => i.migration?.progress?.throttle,
  ],
  [
    "kubevirt_vmi_migration_last_downtime_seconds",
    "Time the guest was paused during the switch-over of its last migration out of this node, in seconds.",
    (i) => (i.migration?.result?.downtimeMs === undefined ? undefined : i.migration.result.downtimeMs / 1000),
  ],
];

/** Registers the per-VMI gauges on `registry`. */
export function registerVmiMetrics(registry: Registry, source: VmiMetricsSource): void {
  for (const [name, help, pick] of SERIES) {
    new Gauge({
      name,
      help,
      labelNames: ["namespace", "name", "node"],
      registers: [registry],
      collect() {
        this.reset();
        for (const info of source.reports()) {
          if (info.migration?.role !== "source") continue;
          const value = pick(info);
          if (value === undefined) continue;
          this.set({ namespace: info.vmi.namespace, name: info.vmi.name, node: source.nodeName }, value);
        }
      },
    });
  }
}
