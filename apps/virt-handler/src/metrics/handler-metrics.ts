/**
 * virt-handler's node and per-VMI metrics beyond the migration progress gauges (`vmi-metrics.ts`):
 *
 *   kubevirt_virt_handler_ready_status{node}                        informer synced and launchers re-adopted
 *   kubevirt_vmi_vcpu_seconds_total{name,namespace,node,id,state}   from each launcher's /v1/stats, cached (see
 *                                                                   STATS_MAX_AGE_MS: a scrape does not fan out)
 *   kubevirt_vmi_memory_domain_bytes / _resident_bytes{name,namespace,node}
 *   kubevirt_vmi_migration_downtime_seconds{node,backend}           completed migrations out of this node
 *   kubevirt_vmi_migration_duration_seconds{node,backend,result}    completed or failed
 *   kubevirt_vmi_migration_failures_total{node,reason}              bounded reasons
 *   kubevirt_vmi_migrations_succeeded_total{name,namespace,node}
 *
 * Outcomes are recorded once per migration uid when the source launcher reports its result (called from the
 * launcher registry's change callback), so a scrape never misses a migration that ended between two scrapes.
 */
import type { DomainInfo, DomainStats } from "@kvt/launcher-rpc";
import { Counter, Gauge, Histogram, migrationFailureReason, type Registry } from "@kvt/observability";

/** Buckets of the downtime histogram (seconds): 1 ms .. 10 s. */
export const DOWNTIME_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Buckets of the migration duration histogram (seconds). */
export const DURATION_BUCKETS = [0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1800];

/** A launcher as the metrics see it. */
export interface MeteredLauncher {
  readonly info: DomainInfo;
  readonly gone: boolean;
  readonly client: { stats(options?: { timeoutMs?: number }): Promise<DomainStats> };
}

/** What the metrics read from. */
export interface HandlerMetricsSource {
  readonly nodeName: string;
  /** Every launcher on the node (including recently gone ones). */
  launchers(): readonly MeteredLauncher[];
  /** True when the handler is ready (cache synced, launchers re-adopted). */
  ready(): boolean;
}

/** The hooks the handler calls. */
export interface HandlerMetrics {
  /** Records the outcome of any migration of `vmiUid` that just ended (idempotent per migration uid). */
  observe(vmiUid: string): void;
}

const RECORDED_LIMIT = 1024;

/** How old the cached launcher stats may get before a scrape asks the launchers again (Prometheus' rate() windows
 * are minutes; KubeVirt scrapes every 30 s). */
export const STATS_MAX_AGE_MS = 5_000;
/** How long a scrape waits for one launcher's /v1/stats. */
export const STATS_TIMEOUT_MS = 1_000;

/** Tuning of {@link registerHandlerMetrics} (defaults above; tests pass a clock). */
export interface HandlerMetricsOptions {
  readonly statsMaxAgeMs?: number;
  readonly statsTimeoutMs?: number;
  readonly now?: () => number;
}

/** Registers virt-handler's metrics on `registry`. */
export function registerHandlerMetrics(
  registry: Registry,
  source: HandlerMetricsSource,
  options: HandlerMetricsOptions = {},
): HandlerMetrics {
  const registers = [registry];
  const node = source.nodeName;
  new Gauge({
    name: "kubevirt_virt_handler_ready_status",
    help: "Indication for a virt-handler that is ready to manage VMIs on its node: 1 when ready, 0 otherwise.",
    labelNames: ["node"],
    registers,
    collect() {
      this.set({ node }, source.ready() ? 1 : 0);
    },
  });
  const running = (): MeteredLauncher[] =>
    source.launchers().filter((l) => !l.gone && (l.info.state === "Running" || l.info.state === "Paused"));
  const maxAgeMs = options.statsMaxAgeMs ?? STATS_MAX_AGE_MS;
  const timeoutMs = options.statsTimeoutMs ?? STATS_TIMEOUT_MS;
  const now = options.now ?? Date.now;
  // The last /v1/stats answer of each launcher (by its client: one per launcher connection).
  const cache = new WeakMap<MeteredLauncher["client"], DomainStats>();
  // Launchers asked at least once: one that does not answer waits for the next round like the others.
  const asked = new WeakSet<MeteredLauncher["client"]>();
  let refreshedAt = Number.NEGATIVE_INFINITY;
  let refreshing: Promise<void> | undefined;
  const ask = (launchers: readonly MeteredLauncher[]): Promise<void> =>
    Promise.all(
      launchers.map((l) => {
        asked.add(l.client);
        return l.client.stats({ timeoutMs }).then(
          (s) => void cache.set(l.client, s),
          // A launcher that does not answer in time keeps its last figures until the next round.
          () => {},
        );
      }),
    ).then(() => {});
  // Scrapes are served from the cache. One round of /v1/stats to every running launcher when the cache is older
  // than maxAgeMs (so 1 s scrapes cost one round per maxAgeMs, not one per scrape), and a call to a launcher seen for
  // the first time (a VM that just started shows up in the next scrape, not maxAgeMs later). At most one round at a
  // time; the three families that need stats share it.
  const latestStats = async (): Promise<[DomainInfo, DomainStats][]> => {
    const live = running();
    if (!refreshing) {
      const stale = now() - refreshedAt >= maxAgeMs;
      const unseen = stale ? live : live.filter((l) => !asked.has(l.client));
      if (unseen.length > 0 || stale) {
        if (stale) refreshedAt = now();
        refreshing = ask(unseen).finally(() => {
          refreshing = undefined;
        });
      }
    }
    if (refreshing) await refreshing;
    return live.flatMap((l): [DomainInfo, DomainStats][] => {
      const s = cache.get(l.client);
      return s ? [[l.info, s]] : [];
    });
  };
  const vmiLabels = (info: DomainInfo) => ({ name: info.vmi.name, namespace: info.vmi.namespace, node });
  new Counter({
    name: "kubevirt_vmi_vcpu_seconds_total",
    help: "Total seconds each vCPU of a VMI spent in each state, as reported by its launcher.",
    labelNames: ["name", "namespace", "node", "id", "state"],
    registers,
    async collect() {
      this.reset();
      for (const [info, s] of await latestStats()) {
        s.vcpuSeconds.forEach((seconds, id) => {
          this.inc({ ...vmiLabels(info), id: String(id), state: "running" }, seconds);
        });
      }
    },
  });
  new Gauge({
    name: "kubevirt_vmi_memory_domain_bytes",
    help: "The amount of memory in bytes allocated to the VMI's guest.",
    labelNames: ["name", "namespace", "node"],
    registers,
    async collect() {
      this.reset();
      for (const [info, s] of await latestStats()) this.set(vmiLabels(info), s.memoryBytes);
    },
  });
  new Gauge({
    name: "kubevirt_vmi_memory_resident_bytes",
    help: "Resident set size in bytes of the VMI's guest memory on the host.",
    labelNames: ["name", "namespace", "node"],
    registers,
    async collect() {
      this.reset();
      for (const [info, s] of await latestStats()) this.set(vmiLabels(info), s.residentBytes ?? s.launcherRssBytes);
    },
  });
  const downtime = new Histogram({
    name: "kubevirt_vmi_migration_downtime_seconds",
    help: "Guest downtime of completed live migrations out of this node (paused on the source until running on the target).",
    labelNames: ["node", "backend"],
    buckets: DOWNTIME_BUCKETS,
    registers,
  });
  const duration = new Histogram({
    name: "kubevirt_vmi_migration_duration_seconds",
    help: "Total duration of live migrations out of this node, from start to completion or failure.",
    labelNames: ["node", "backend", "result"],
    buckets: DURATION_BUCKETS,
    registers,
  });
  const failures = new Counter({
    name: "kubevirt_vmi_migration_failures_total",
    help: "Live migrations out of this node that failed, by reason.",
    labelNames: ["node", "reason"],
    registers,
  });
  const succeeded = new Counter({
    name: "kubevirt_vmi_migrations_succeeded_total",
    help: "Live migrations of a VMI out of this node that completed.",
    labelNames: ["name", "namespace", "node"],
    registers,
  });
  const recorded = new Set<string>();
  const startedAt = Date.now();
  return {
    observe(vmiUid) {
      for (const l of source.launchers()) {
        const m = l.info.migration;
        if (l.info.vmi.uid !== vmiUid || m?.role !== "source" || !m.result || recorded.has(m.migrationUid)) continue;
        recorded.add(m.migrationUid);
        if (recorded.size > RECORDED_LIMIT) recorded.delete(recorded.values().next().value ?? "");
        // A launcher re-adopted after a handler restart reports migrations this process did not see end.
        if (m.endTime && Date.parse(m.endTime) < startedAt) continue;
        const backend = l.info.backend ?? "native";
        const r = m.result;
        duration.observe({ node, backend, result: r.ok ? "succeeded" : "failed" }, r.totalSeconds);
        if (r.ok) {
          if (r.downtimeMs !== undefined) downtime.observe({ node, backend }, r.downtimeMs / 1000);
          succeeded.inc(vmiLabels(l.info));
        } else {
          failures.inc({ node, reason: migrationFailureReason(r.failureReason) });
        }
      }
    },
  };
}
