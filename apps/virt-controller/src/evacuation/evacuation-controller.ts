/**
 * The evacuation controller (KubeVirt `drain/evacuation`): a VMI whose `status.evacuationNodeName` names the node it
 * runs on gets a VirtualMachineInstanceMigration (`kubevirt-evacuation-*`, priority system-critical, or
 * system-maintenance when the descheduler asked), one at a time per VMI, within the per-node outbound limit, and
 * after a failed evacuation migration only when its backoff (20 s, doubling) has passed. Only VMIs an eviction should
 * migrate (strategy LiveMigrate, or LiveMigrateIfPossible; the VMI's own, else the KubeVirt CR's) that are
 * LiveMigratable and not shutting down get one: an External VMI is left to whoever handles it (KubeVirt's filter).
 * A node tainted `<migrations.nodeDrainTaintKey>:NoSchedule` (default `kubevirt.io/drain`) evacuates every VMI on
 * it the same way, marked or not (KubeVirt's older drain, without evictions).
 */
import {
  ANNOTATION,
  API_VERSION,
  clusterMigrationConfiguration,
  FINALIZER,
  isMigratable,
  isMigrationFinal,
  KIND,
  type KubeVirtConfiguration,
  keyOf,
  LABEL,
  migratableOnEviction,
  type ObjectKey,
  objectKey,
  splitKey,
  type VirtualMachineInstance,
  type VirtualMachineInstanceMigration,
} from "@kvt/api";
import {
  done,
  type EventSink,
  type Expectations,
  type InformerHandlers,
  type Node,
  type ReconcileContext,
  type Reconciler,
  type ResourceClient,
  type Result,
  requeueAfter,
  SyncError,
} from "@kvt/kube";

/** First backoff after a failed evacuation migration. */
export const EVACUATION_BACKOFF_MS = 20_000;

/** What the evacuation controller needs. */
export interface EvacuationControllerDeps {
  readonly vmis: { get(key: ObjectKey): VirtualMachineInstance | undefined };
  readonly migrations: { list(): VirtualMachineInstanceMigration[] };
  /** Migrations in flight from `node` (any VMI). */
  readonly outboundFrom: (node: string) => number;
  readonly perNodeLimit?: number;
  readonly migrationClient: Pick<ResourceClient<VirtualMachineInstanceMigration>, "create">;
  readonly recorder: EventSink;
  readonly expectations: Expectations;
  /** The KubeVirt CR's configuration (evictionStrategy: the default for VMIs without one; migrations.nodeDrainTaintKey). */
  readonly clusterConfig?: () => Pick<KubeVirtConfiguration, "evictionStrategy" | "migrations"> | undefined;
  /** Nodes by key, and the VMIs on a node: a node with the drain taint evacuates all of them. */
  readonly nodes?: { get(key: ObjectKey): Node | undefined };
  readonly vmisOnNode?: (node: string) => VirtualMachineInstance[];
  readonly now?: () => number;
}

/** Reconciles VMIs that must leave their node. */
export class EvacuationController implements Reconciler {
  readonly #d: EvacuationControllerDeps;
  constructor(deps: EvacuationControllerDeps) {
    this.#d = deps;
  }

  /** Changes of VMIs to evacuate enqueue the VMI; a new migration lowers the expectation of its VMI. */
  handlers(enqueue: (key: ObjectKey) => void): {
    vmi: InformerHandlers<VirtualMachineInstance>;
    migration: InformerHandlers<VirtualMachineInstanceMigration>;
    node: InformerHandlers<Node>;
  } {
    const forMigration = (m: VirtualMachineInstanceMigration, add: boolean): void => {
      if (!m.metadata?.annotations?.[ANNOTATION.evacuationMigration]) return;
      const key = keyOf({ metadata: { namespace: m.metadata.namespace, name: m.spec.vmiName } });
      if (add) this.#d.expectations.creationObserved(key);
      enqueue(key);
    };
    // Only a VMI asked to leave its node has anything to reconcile here (every other VMI returns at once).
    const forVmi = (v: VirtualMachineInstance): void => {
      if (v.status?.evacuationNodeName || this.#drainTainted(v.status?.nodeName)) enqueue(keyOf(v));
    };
    const forNode = (n: Node): void => {
      if (!this.#hasDrainTaint(n)) return;
      for (const v of this.#d.vmisOnNode?.(n.metadata?.name ?? "") ?? []) enqueue(keyOf(v));
    };
    return {
      vmi: { onAdd: forVmi, onUpdate: (_o, v) => forVmi(v) },
      migration: { onAdd: (m) => forMigration(m, true), onUpdate: (_o, m) => forMigration(m, false) },
      node: { onAdd: forNode, onUpdate: (_o, n) => forNode(n) },
    };
  }

  #hasDrainTaint(node: Node | undefined): boolean {
    const key = clusterMigrationConfiguration(this.#d.clusterConfig?.()?.migrations ?? {}).nodeDrainTaintKey;
    return !!node?.spec?.taints?.some((t) => t.key === key && t.effect === "NoSchedule");
  }

  #drainTainted(nodeName: string | undefined): boolean {
    if (!nodeName || !this.#d.nodes) return false;
    return this.#hasDrainTaint(this.#d.nodes.get(objectKey(undefined, nodeName)));
  }

  async reconcile(key: ObjectKey, ctx: ReconcileContext): Promise<Result> {
    const vmi = this.#d.vmis.get(key);
    if (!vmi) {
      this.#d.expectations.delete(key);
      return done();
    }
    const marked = vmi.status?.evacuationNodeName;
    const node = marked ?? (this.#drainTainted(vmi.status?.nodeName) ? vmi.status?.nodeName : undefined);
    if (!node || node !== vmi.status?.nodeName || vmi.status?.phase !== "Running") return done();
    if (vmi.metadata?.deletionTimestamp || !isMigratable(vmi)) return done();
    if (!migratableOnEviction(vmi, this.#d.clusterConfig?.())) return done();
    if (!this.#d.expectations.satisfied(key)) return done();
    const { namespace, name } = splitKey(key);
    const mine = this.#d.migrations
      .list()
      .filter((m) => m.metadata?.namespace === namespace && m.spec.vmiName === name);
    if (mine.some((m) => !isMigrationFinal(m.status?.phase))) return done();
    const now = (this.#d.now ?? Date.now)();
    const failed = mine
      .filter((m) => m.metadata?.annotations?.[ANNOTATION.evacuationMigration] && m.status?.phase === "Failed")
      .sort((a, b) => (a.metadata?.creationTimestamp ?? "").localeCompare(b.metadata?.creationTimestamp ?? ""));
    if (failed.length > 0) {
      const last = failed.at(-1)!;
      const endedAt = Date.parse(
        last.status?.phaseTransitionTimestamps?.at(-1)?.phaseTransitionTimestamp ??
          last.metadata?.creationTimestamp ??
          "",
      );
      const wait = EVACUATION_BACKOFF_MS * 2 ** Math.min(failed.length - 1, 10) - (now - endedAt);
      if (wait > 0) return requeueAfter(wait);
    }
    if (this.#d.outboundFrom(node) >= (this.#d.perNodeLimit ?? 2)) return requeueAfter(5000);
    const descheduler = vmi.metadata?.annotations?.[ANNOTATION.evictionSource] === "descheduler";
    const migration: VirtualMachineInstanceMigration = {
      apiVersion: API_VERSION,
      kind: KIND.VirtualMachineInstanceMigration,
      metadata: {
        generateName: "kubevirt-evacuation-",
        namespace,
        labels: { [LABEL.migrationSelector]: name },
        annotations: { [ANNOTATION.evacuationMigration]: node },
        finalizers: [FINALIZER.migration],
      },
      spec: { vmiName: name, priority: descheduler ? "system-maintenance" : "system-critical" },
    };
    this.#d.expectations.expectCreations(key, 1);
    try {
      const created = await this.#d.migrationClient.create(migration);
      this.#d.recorder.event(
        vmi,
        "Normal",
        "SuccessfulCreate",
        `Created Migration ${created.metadata?.name} for evacuation of node ${node}`,
      );
      ctx.logger.info({ migration: created.metadata?.name, node }, "created evacuation migration");
    } catch (error) {
      this.#d.expectations.lowerCreations(key);
      this.#d.recorder.event(
        vmi,
        "Warning",
        "FailedCreate",
        `Error creating a Migration for evacuation: ${String(error)}`,
      );
      throw new SyncError("FailedCreate", `Error creating evacuation migration: ${String(error)}`, { cause: error });
    }
    return done();
  }
}
