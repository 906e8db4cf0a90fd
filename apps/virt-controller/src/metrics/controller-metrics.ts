/**
 * virt-controller's own metrics (KubeVirt's `pkg/monitoring/metrics/virt-controller`), cluster-wide and never per
 * VMI (per-VMI series come only from virt-handler):
 *
 *   kubevirt_virt_controller_leading_status / _ready_status          this replica leads / is ready
 *   kubevirt_vmi_phase_count{node,phase}                               VMIs by node and phase (from the informer cache)
 *   kubevirt_vmi_phase_transition_time_from_creation_seconds{phase}    creation -> each VMI phase
 *   kubevirt_vmi_migrations_in_{pending,scheduling,running}_phase      migrations in flight
 *   kubevirt_vmi_migration_succeeded{namespace}                        migrations that succeeded
 *   kubevirt_vmi_migration_failed{namespace,reason}                    migrations that failed (bounded reason)
 *   kubevirt_vmi_migration_phase_transition_time_from_creation_seconds{phase}  creation -> each VMIM phase
 *
 * Gauges are computed at scrape time from the informer caches; histograms and counters are observed when the
 * informers see a phase change (on the leader only, which is the replica that runs the informers).
 */
import type { VirtualMachineInstance, VirtualMachineInstanceMigration } from "@kvt/api";
import type { InformerHandlers, KubeObject } from "@kvt/kube";
import { Counter, Gauge, Histogram, migrationFailureReason, type Registry } from "@kvt/observability";

/** Buckets of the phase-transition histograms (KubeVirt's phaseTransitionTimeBuckets, in seconds). */
export const PHASE_TRANSITION_BUCKETS = [0.5, 1, 2, 5, 10, 20, 30, 40, 50, 60, 90, 120, 180, 240, 300, 600, 1800, 3600];

const PENDING = new Set(["", "Pending"]);
const SCHEDULING = new Set(["Scheduling", "Scheduled"]);
const RUNNING = new Set(["PreparingTarget", "TargetReady", "Running"]);

/** What the metrics read from: the informers the app runs. */
export interface ControllerMetricSources {
  readonly vmis: ObservedInformer<VirtualMachineInstance>;
  readonly migrations: ObservedInformer<VirtualMachineInstanceMigration>;
}

/** The part of an informer the metrics use. */
export interface ObservedInformer<T extends KubeObject> {
  readonly store: { list(): T[] };
  addHandlers(handlers: InformerHandlers<T>): void;
}

/** Registers virt-controller's metrics on an app registry; the app feeds them once its informers run. */
export class ControllerMetrics {
  readonly #leading: Gauge;
  readonly #ready: Gauge;
  readonly #vmiTransition: Histogram<"phase">;
  readonly #migrationTransition: Histogram<"phase">;
  readonly #succeeded: Counter<"namespace">;
  readonly #failed: Counter<"namespace" | "reason">;
  #sources: ControllerMetricSources | undefined;

  constructor(registry: Registry) {
    const registers = [registry];
    this.#leading = new Gauge({
      name: "kubevirt_virt_controller_leading_status",
      help: "Indication for an operating virt-controller: 1 when this replica is the leader, 0 on a standby.",
      registers,
    });
    this.#ready = new Gauge({
      name: "kubevirt_virt_controller_ready_status",
      help: "Indication for a virt-controller that is ready to take the lead: 1 when ready, 0 otherwise.",
      registers,
    });
    const sources = (): ControllerMetricSources | undefined => this.#sources;
    new Gauge({
      name: "kubevirt_vmi_phase_count",
      help: "Number of VMIs in the cluster by node and phase.",
      labelNames: ["node", "phase"],
      registers,
      collect() {
        this.reset();
        const counts = new Map<string, { node: string; phase: string; n: number }>();
        for (const vmi of sources()?.vmis.store.list() ?? []) {
          const node = vmi.status?.nodeName ?? "";
          const phase = vmi.status?.phase ?? "Pending";
          const key = `${node}\0${phase}`;
          const c = counts.get(key) ?? { node, phase, n: 0 };
          c.n++;
          counts.set(key, c);
        }
        for (const c of counts.values()) this.set({ node: c.node, phase: c.phase.toLowerCase() }, c.n);
      },
    });
    const inPhase = (name: string, help: string, phases: ReadonlySet<string>): void => {
      new Gauge({
        name,
        help,
        registers,
        collect() {
          const all = sources()?.migrations.store.list() ?? [];
          this.set(all.filter((m) => phases.has(m.status?.phase ?? "")).length);
        },
      });
    };
    inPhase("kubevirt_vmi_migrations_in_pending_phase", "Number of current migrations in the Pending phase.", PENDING);
    inPhase(
      "kubevirt_vmi_migrations_in_scheduling_phase",
      "Number of current migrations in the Scheduling or Scheduled phase.",
      SCHEDULING,
    );
    inPhase(
      "kubevirt_vmi_migrations_in_running_phase",
      "Number of current migrations in the PreparingTarget, TargetReady or Running phase.",
      RUNNING,
    );
    this.#vmiTransition = new Histogram({
      name: "kubevirt_vmi_phase_transition_time_from_creation_seconds",
      help: "Seconds from the creation of a VMI to each of its phase transitions.",
      labelNames: ["phase"],
      buckets: PHASE_TRANSITION_BUCKETS,
      registers,
    });
    this.#migrationTransition = new Histogram({
      name: "kubevirt_vmi_migration_phase_transition_time_from_creation_seconds",
      help: "Seconds from the creation of a migration to each of its phase transitions.",
      labelNames: ["phase"],
      buckets: PHASE_TRANSITION_BUCKETS,
      registers,
    });
    this.#succeeded = new Counter({
      name: "kubevirt_vmi_migration_succeeded",
      help: "Number of migrations that succeeded, by namespace.",
      labelNames: ["namespace"],
      registers,
    });
    this.#failed = new Counter({
      name: "kubevirt_vmi_migration_failed",
      help: "Number of migrations that failed, by namespace and failure reason.",
      labelNames: ["namespace", "reason"],
      registers,
    });
  }

  /** Sets `kubevirt_virt_controller_leading_status`. */
  setLeading(leading: boolean): void {
    this.#leading.set(leading ? 1 : 0);
  }

  /** Sets `kubevirt_virt_controller_ready_status`. */
  setReady(ready: boolean): void {
    this.#ready.set(ready ? 1 : 0);
  }

  /** Feeds the metrics from the app's informers (call once, when they are created). */
  watch(sources: ControllerMetricSources): void {
    this.#sources = sources;
    sources.vmis.addHandlers({
      onUpdate: (old, vmi) => {
        const phase = vmi.status?.phase;
        if (phase && phase !== old.status?.phase) this.#vmiTransition.observe({ phase }, sinceCreation(vmi));
      },
    });
    sources.migrations.addHandlers({
      onUpdate: (old, migration) => {
        const phase = migration.status?.phase;
        if (!phase || phase === old.status?.phase) return;
        this.#migrationTransition.observe({ phase }, sinceCreation(migration));
        const namespace = migration.metadata?.namespace ?? "";
        if (phase === "Succeeded") this.#succeeded.inc({ namespace });
        if (phase === "Failed") {
          const reason = migrationFailureReason(migration.status?.migrationState?.failureReason);
          this.#failed.inc({ namespace, reason });
        }
      },
    });
  }
}

function sinceCreation(obj: KubeObject): number {
  const created = Date.parse(obj.metadata?.creationTimestamp ?? "");
  return Number.isNaN(created) ? 0 : Math.max(0, (Date.now() - created) / 1000);
}
