/**
 * The migration controller (KubeVirt `watch/migration`): drives each VMIM through its phases (`migration-plan.ts`
 * decides), creates the target pod within the parallel-migration limits, hands the migration off to virt-handler
 * through `vmi.status.migrationState` (with the resolved MigrationPolicy), cancels on VMIM deletion, and keeps at
 * most 5 finished VMIMs per VMI.
 */
import {
  ANNOTATION,
  clusterMigrationConfiguration,
  emulationAllowed,
  FINALIZER,
  isMigrationFinal,
  type KubeVirtConfiguration,
  keyOf,
  LABEL,
  type MigrationPolicy,
  type MigrationState,
  type ObjectKey,
  objectKey,
  type PersistentVolumeClaimInfo,
  type ResolvedMigrationConfiguration,
  resolveMigrationConfiguration,
  splitKey,
  type VirtualMachineInstance,
  type VirtualMachineInstanceMigration,
} from "@kvt/api";
import {
  diffMembers,
  done,
  type EventSink,
  type Expectations,
  type InformerHandlers,
  isNotFound,
  type JsonPatchOp,
  type Pod,
  type ReconcileContext,
  type Reconciler,
  type ResourceClient,
  type Result,
  requeueAfter,
  SyncError,
} from "@kvt/kube";
import { traceparentOf } from "@kvt/observability";
import { context, type Span, SpanStatusCode, trace } from "@opentelemetry/api";
import { livePods } from "../vmi/vmi-status.ts";

const tracer = trace.getTracer("virt-controller");

import { FINISHED_MIGRATIONS_KEPT, type MigrationAction, planMigration } from "./migration-plan.ts";
import { renderTargetPod } from "./target-pod.ts";

/** What the migration controller needs. */
export interface MigrationControllerDeps {
  readonly migrations: {
    get(key: ObjectKey): VirtualMachineInstanceMigration | undefined;
    list(): VirtualMachineInstanceMigration[];
  };
  /**
   * The migrations of the VMI under `key` (an informer index in the app); default: a scan of `migrations.list()`.
   * Every VMI change asks, so with thousands of finished migrations kept the scan would cost per event.
   */
  readonly migrationsOfVmi?: (key: ObjectKey) => VirtualMachineInstanceMigration[];
  readonly vmis: { get(key: ObjectKey): VirtualMachineInstance | undefined };
  /** Pods labelled with a migration uid. */
  readonly podsOfMigration: (migrationUid: string) => Pod[];
  /** Launcher pods of a VMI (by VMI uid). */
  readonly podsOfVmi: (vmiUid: string) => Pod[];
  readonly policies: () => MigrationPolicy[];
  readonly namespaceLabels: (namespace: string) => Record<string, string>;
  readonly migrationClient: Pick<ResourceClient<VirtualMachineInstanceMigration>, "patch" | "delete">;
  readonly vmiClient: Pick<ResourceClient<VirtualMachineInstance>, "patch">;
  readonly podClient: Pick<ResourceClient<Pod>, "create" | "delete">;
  readonly recorder: EventSink;
  /** Target pod creations per VMIM key. */
  readonly expectations: Expectations;
  /**
   * The KubeVirt CR's `spec.configuration` now (its `migrations`: unset fields take KubeVirt's defaults, @kvt/api;
   * its `developerConfiguration.useEmulation` shapes the target pod); default none.
   */
  readonly clusterConfig?: () => KubeVirtConfiguration | undefined;
  /** The launcher pods' image; default the pod template's. */
  readonly launcherImage?: string;
  /** The claim `namespace/name` (its volumeMode shapes the target pod as the source's); default: the VMI's status. */
  readonly claim?: (namespace: string, name: string) => PersistentVolumeClaimInfo | undefined;
  readonly now?: () => number;
}

const ACTIVE: ReadonlySet<string> = new Set(["Scheduling", "Scheduled", "PreparingTarget", "TargetReady", "Running"]);

/** Index function for the migrations informer: the key of the VMI a migration moves (`migrationsOfVmi`). */
export const migrationVmiIndex = (m: VirtualMachineInstanceMigration): string[] =>
  m.spec.vmiName ? [objectKey(m.metadata?.namespace, m.spec.vmiName)] : [];

/** Reconciles VirtualMachineInstanceMigrations. */
export class MigrationController implements Reconciler {
  readonly #d: MigrationControllerDeps;
  constructor(deps: MigrationControllerDeps) {
    this.#d = deps;
  }

  /** Informer handlers: VMIM, target pod and VMI changes enqueue the VMIMs concerned. */
  handlers(enqueue: (key: ObjectKey) => void): {
    migration: InformerHandlers<VirtualMachineInstanceMigration>;
    pod: InformerHandlers<Pod>;
    vmi: InformerHandlers<VirtualMachineInstance>;
  } {
    const e = this.#d.expectations;
    const forPod = (pod: Pod, f?: (k: ObjectKey) => void): void => {
      const name = pod.metadata?.labels?.[LABEL.migrationName];
      if (!name) return;
      const key = objectKey(pod.metadata?.namespace, name);
      f?.(key);
      enqueue(key);
    };
    const forVmi = (vmi: VirtualMachineInstance): void => {
      for (const m of this.#migrationsOfVmi(keyOf(vmi))) if (!isMigrationFinal(m.status?.phase)) enqueue(keyOf(m));
    };
    return {
      migration: {
        onAdd: (m) => enqueue(keyOf(m)),
        onUpdate: (_o, m) => enqueue(keyOf(m)),
        onDelete: (m) => enqueue(keyOf(m)),
      },
      pod: {
        onAdd: (p) => forPod(p, (k) => e.creationObserved(k)),
        onUpdate: (_o, p) => forPod(p),
        onDelete: (p) => forPod(p),
      },
      vmi: { onUpdate: (_o, v) => forVmi(v), onDelete: forVmi },
    };
  }

  async reconcile(key: ObjectKey, ctx: ReconcileContext): Promise<Result> {
    const m = this.#d.migrations.get(key);
    if (!m) {
      this.#d.expectations.delete(key);
      return done();
    }
    if (!this.#d.expectations.satisfied(key)) return done();
    // Identities go in attributes (the span name stays `reconcile VirtualMachineInstanceMigration`).
    ctx.span.setAttributes({
      "kubevirt.migration.name": m.metadata?.name ?? "",
      "kubevirt.migration.uid": m.metadata?.uid ?? "",
      "kubevirt.migration.phase": m.status?.phase ?? "Pending",
      "kubevirt.vmi.name": m.spec.vmiName ?? "",
    });
    const vmi = this.#d.vmis.get(objectKey(m.metadata?.namespace, m.spec.vmiName ?? ""));
    const config = clusterMigrationConfiguration(this.#d.clusterConfig?.()?.migrations);
    const { cluster, node } = this.#activeCounts(m, vmi);
    const plan = planMigration({
      migration: m,
      vmi,
      targetPods: this.#d.podsOfMigration(m.metadata?.uid ?? ""),
      runningInCluster: cluster,
      outboundFromNode: node,
      limits: {
        perCluster: config.parallelMigrationsPerCluster,
        perNode: config.parallelOutboundMigrationsPerNode,
      },
      handoffState: () => this.#handoffState(m, vmi!, config),
      now: (this.#d.now ?? Date.now)(),
    });
    let syncError: unknown;
    for (const action of plan.actions) {
      try {
        await this.#apply(action, m, vmi, ctx);
      } catch (error) {
        syncError = error;
        break;
      }
    }
    const { namespace, name } = splitKey(key);
    const ops = diffMembers("/status", m.status, plan.status);
    if (ops.length > 0 && !syncError) {
      await this.#d.migrationClient.patch(namespace, name, ops, "status");
      if (plan.status.phase !== m.status?.phase)
        ctx.logger.info({ from: m.status?.phase ?? "", to: plan.status.phase }, "migration phase changed");
    }
    if (!syncError) for (const ev of plan.events) this.#d.recorder.event(m, ev.type, ev.reason, ev.message);
    if (syncError)
      throw syncError instanceof SyncError
        ? syncError
        : new SyncError("FailedSync", syncError instanceof Error ? syncError.message : "migration action failed", {
            cause: syncError,
          });
    if (isMigrationFinal(plan.status.phase)) await this.#garbageCollect(m, ctx);
    return plan.requeueAfterMs !== undefined ? requeueAfter(plan.requeueAfterMs) : done();
  }

  #migrationsOfVmi(key: ObjectKey): VirtualMachineInstanceMigration[] {
    if (this.#d.migrationsOfVmi) return this.#d.migrationsOfVmi(key);
    return this.#d.migrations.list().filter((m) => migrationVmiIndex(m)[0] === key);
  }

  #activeCounts(
    m: VirtualMachineInstanceMigration,
    vmi: VirtualMachineInstance | undefined,
  ): { cluster: number; node: number } {
    let cluster = 0;
    let node = 0;
    const sourceNode = vmi?.status?.nodeName;
    for (const other of this.#d.migrations.list()) {
      if (other.metadata?.uid === m.metadata?.uid || !ACTIVE.has(other.status?.phase ?? "")) continue;
      cluster++;
      const otherVmi = this.#d.vmis.get(objectKey(other.metadata?.namespace, other.spec.vmiName ?? ""));
      if (sourceNode && otherVmi?.status?.nodeName === sourceNode) node++;
    }
    return { cluster, node };
  }

  #handoffState(
    m: VirtualMachineInstanceMigration,
    vmi: VirtualMachineInstance,
    config: ResolvedMigrationConfiguration,
  ): MigrationState {
    // The VMI's labels as they are: KubeVirt skips both selectors for a VMI without labels.
    const { configuration, policyName } = resolveMigrationConfiguration(
      config,
      this.#d.policies(),
      vmi.metadata?.labels,
      this.#d.namespaceLabels(vmi.metadata?.namespace ?? ""),
    );
    const sourcePod = livePods(this.#d.podsOfVmi(vmi.metadata?.uid ?? "")).find(
      (p) => p.spec?.nodeName === vmi.status?.nodeName,
    );
    const state: MigrationState = {
      migrationUid: m.metadata?.uid,
      sourceNode: vmi.status?.nodeName,
      migrationConfiguration: configuration,
    };
    if (sourcePod?.metadata?.name) state.sourcePod = sourcePod.metadata.name;
    if (policyName) state.migrationPolicyName = policyName;
    return state;
  }

  async #createTargetPod(
    key: ObjectKey,
    m: VirtualMachineInstanceMigration,
    vmi: VirtualMachineInstance,
    ctx: ReconcileContext,
    span: Span,
  ): Promise<void> {
    const ns = vmi.metadata?.namespace ?? "default";
    const claim = this.#d.claim;
    const pod = renderTargetPod(vmi, m, {
      allowEmulation: emulationAllowed(this.#d.clusterConfig?.()),
      ...(this.#d.launcherImage ? { launcherImage: this.#d.launcherImage } : {}),
      ...(claim ? { claims: (name: string) => claim(ns, name) } : {}),
    });
    const traceparent = traceparentOf(trace.setSpan(context.active(), span));
    if (traceparent)
      pod.metadata = {
        ...pod.metadata,
        annotations: { ...pod.metadata?.annotations, [ANNOTATION.traceparent]: traceparent },
      };
    try {
      const created = await this.#d.expectations.creating(key, () => this.#d.podClient.create(pod));
      span.setAttribute("k8s.pod.name", created.metadata?.name ?? "");
      this.#d.recorder.event(m, "Normal", "SuccessfulCreate", `Created migration target pod ${created.metadata?.name}`);
      ctx.logger.info({ pod: created.metadata?.name }, "created migration target pod");
    } catch (error) {
      this.#d.recorder.event(m, "Warning", "FailedCreate", `Error creating migration target pod: ${String(error)}`);
      throw new SyncError("FailedCreate", `Error creating migration target pod: ${String(error)}`, {
        cause: error,
      });
    }
  }

  async #apply(
    action: MigrationAction,
    m: VirtualMachineInstanceMigration,
    vmi: VirtualMachineInstance | undefined,
    ctx: ReconcileContext,
  ): Promise<void> {
    const key = keyOf(m);
    const { namespace, name } = splitKey(key);
    switch (action.kind) {
      case "createTargetPod": {
        // A child span of the reconcile; the target pod carries it as its traceparent.
        await tracer.startActiveSpan(
          "create Pod",
          { attributes: { "k8s.namespace.name": namespace, "kubevirt.migration.name": name } },
          async (span) => {
            try {
              await this.#createTargetPod(key, m, vmi!, ctx, span);
            } catch (error) {
              span.setStatus({ code: SpanStatusCode.ERROR, message: String(error) });
              throw error;
            } finally {
              span.end();
            }
          },
        );
        return;
      }
      case "deleteTargetPods":
        for (const pod of livePods(this.#d.podsOfMigration(m.metadata?.uid ?? ""))) {
          await this.#d.podClient
            .delete(pod.metadata?.namespace ?? namespace, pod.metadata?.name ?? "", {
              preconditions: { uid: pod.metadata?.uid },
            })
            .catch((error: unknown) => {
              if (!isNotFound(error)) throw error;
            });
          this.#d.recorder.event(m, "Normal", "SuccessfulDelete", `Deleted migration target pod ${pod.metadata?.name}`);
        }
        return;
      case "handoff": {
        const v = vmi!;
        const labels = v.metadata?.labels ?? {};
        await this.#d.vmiClient.patch(v.metadata?.namespace ?? namespace, v.metadata?.name ?? "", [
          { op: "test", path: "/metadata/uid", value: v.metadata?.uid },
          ...(v.status?.migrationState
            ? [{ op: "test" as const, path: "/status/migrationState", value: v.status.migrationState }]
            : []),
          { op: "add", path: "/status/migrationState", value: action.state },
          {
            op: "add",
            path: "/metadata/labels",
            value: { ...labels, [LABEL.migrationTargetNodeName]: action.state.targetNode ?? "" },
          },
          // The handlers' reconciles of this VMI join the migration's trace while it runs.
          ...migrationTraceOps(v),
        ]);
        ctx.logger.info(
          { targetNode: action.state.targetNode, policy: action.state.migrationPolicyName },
          "handed migration off to virt-handler",
        );
        return;
      }
      case "abort": {
        const v = vmi!;
        await this.#d.vmiClient.patch(v.metadata?.namespace ?? namespace, v.metadata?.name ?? "", [
          { op: "test", path: "/status/migrationState/migrationUid", value: m.metadata?.uid },
          { op: "add", path: "/status/migrationState/abortRequested", value: true },
        ]);
        this.#d.recorder.event(
          m,
          "Normal",
          "AbortRequested",
          "Migration abort requested by deleting the migration object",
        );
        return;
      }
      case "removeFinalizer": {
        const finalizers = m.metadata?.finalizers ?? [];
        if (!finalizers.includes(FINALIZER.migration)) return;
        await this.#d.migrationClient.patch(namespace, name, [
          { op: "test", path: "/metadata/finalizers", value: finalizers },
          { op: "replace", path: "/metadata/finalizers", value: finalizers.filter((f) => f !== FINALIZER.migration) },
        ]);
        return;
      }
    }
  }

  /** Deletes the oldest finished VMIMs of the same VMI beyond {@link FINISHED_MIGRATIONS_KEPT}. */
  async #garbageCollect(m: VirtualMachineInstanceMigration, ctx: ReconcileContext): Promise<void> {
    const finished = this.#migrationsOfVmi(objectKey(m.metadata?.namespace, m.spec.vmiName ?? ""))
      .filter((o) => isMigrationFinal(o.status?.phase) && !o.metadata?.deletionTimestamp)
      .sort((a, b) => (a.metadata?.creationTimestamp ?? "").localeCompare(b.metadata?.creationTimestamp ?? ""));
    for (const old of finished.slice(0, Math.max(0, finished.length - FINISHED_MIGRATIONS_KEPT))) {
      const { namespace, name } = splitKey(keyOf(old));
      await this.#d.migrationClient.delete(namespace, name).catch((error: unknown) => {
        // Already gone is fine; anything else is retried at the next finished migration of this VMI.
        if (!isNotFound(error))
          ctx.logger.warn({ err: error, migration: name }, "cannot garbage-collect a finished migration");
      });
    }
  }
}

/** Patch ops that set the VMI's migration traceparent to the active span (none when tracing is off). */
function migrationTraceOps(vmi: VirtualMachineInstance): JsonPatchOp[] {
  const traceparent = traceparentOf();
  if (!traceparent) return [];
  return [
    {
      op: "add",
      path: "/metadata/annotations",
      value: { ...vmi.metadata?.annotations, [ANNOTATION.migrationTraceparent]: traceparent },
    },
  ];
}
