/**
 * The controllers of virt-controller, wired: one informer per kind (shared by every controller), one workqueue and
 * runner per controller (KubeVirt's queue names and thread counts), started when this replica becomes leader.
 *
 * ```
 *   informers (VM, VMI, launcher Pods, VMIM, Node, MigrationPolicy, KubeVirt, VMIRS, VirtualMachinePool)
 *       │  ^
 *       │  └──────────────────── API server (writes) <─────────────────────────┐
 *       └──handlers──> queues ──runners──> controllers ──────────────────────────┘
 * ```
 * The certificate manager (certificates/) runs beside them on the leader: virt-operator's duty of keeping the
 * KubeVirt CA, the components' certificate Secrets and the webhooks' CA bundles, which we have no operator for; so do
 * the KubeVirt CR's status and the common-instancetypes deployment (kubevirt/).
 */
import {
  ANNOTATION,
  activeKubeVirt,
  CERTIFICATES,
  claimInfo,
  claimOfVolume,
  commonInstancetypes,
  instancetypeResourceType,
  KUBEVIRT_CR,
  type KubeVirt,
  type KubeVirtConfiguration,
  keyOf,
  LABEL,
  type MigrationPolicy,
  type ObjectKey,
  objectKey,
  type PersistentVolumeClaimInfo,
  type VirtualMachine,
  type VirtualMachineInstance,
  type VirtualMachineInstanceMigration,
  type VirtualMachineInstanceReplicaSet,
  type VirtualMachinePool,
} from "@kvt/api";
import {
  CORE_V1,
  type CoreEvent,
  controllerOwnerIndex,
  EventRecorder,
  Expectations,
  Informer,
  KUBEVIRT_V1,
  type KubeObject,
  labelIndex,
  type Node,
  namespaceIndex,
  type PersistentVolumeClaim,
  type Pod,
  type Reconciler,
  type ResourceClient,
  type RestTransport,
  Runner,
  resourceClient,
  WorkQueue,
} from "@kvt/kube";
import { contextFromTraceparent } from "@kvt/observability";
import type { Context, Tracer } from "@opentelemetry/api";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import { BUNDLE_TARGET_TYPES, CertificateManager } from "./certificates/cert-manager.ts";
import { EvacuationController } from "./evacuation/evacuation-controller.ts";
import {
  BUNDLED_KINDS,
  type ClusterObjectView,
  CommonInstancetypesController,
} from "./kubevirt/common-instancetypes.ts";
import { APPS_V1, KubeVirtStatusController } from "./kubevirt/kubevirt-status.ts";
import type { ControllerMetrics } from "./metrics/controller-metrics.ts";
import { MigrationController, migrationVmiIndex } from "./migration/migration-controller.ts";
import { NodeController } from "./node/node-controller.ts";
import { PoolController } from "./pool/pool-controller.ts";
import type { PoolRevision } from "./pool/pool-revisions.ts";
import { PoolUpdater } from "./pool/pool-updater.ts";
import { ReplicaSetController } from "./replicaset/replicaset-controller.ts";
import { CONTROLLER_REVISIONS, InstancetypeSync } from "./vm/instancetype-sync.ts";
import { VmController } from "./vm/vm-controller.ts";
import { VmiController } from "./vmi/vmi-controller.ts";

const ACTIVE_PHASES: ReadonlySet<string> = new Set([
  "Scheduling",
  "Scheduled",
  "PreparingTarget",
  "TargetReady",
  "Running",
]);

const STARTING_PHASES: ReadonlySet<string> = new Set(["", "Pending", "Scheduling", "Scheduled"]);

/** What the app needs of an informer to run it. */
interface Lifecycle {
  start(): void;
  stop(): void;
  waitForSync(): Promise<void>;
}

/** Options for {@link VirtControllerApp}. */
export interface VirtControllerAppOptions {
  readonly transport: RestTransport;
  readonly logger: Logger;
  readonly registry: Registry;
  readonly tracer?: Tracer;
  /** virt-controller's own metrics, fed from the informers once they run. */
  readonly metrics?: ControllerMetrics;
  /**
   * Concurrent reconciles per controller; default 10 for vm and vmi (KubeVirt runs 3 and 10 goroutines; ours are
   * async slots that mostly wait on the API server, so more of them cost little).
   */
  readonly threads?: { vm?: number; vmi?: number };
  /** Host name for event sources. */
  readonly host?: string;
  /** The install namespace: the certificate Secrets and the kubevirt-ca ConfigMap live there; default kubevirt. */
  readonly namespace?: string;
  /** The launcher pods' image (`--launcher-image`); default the pod template's `kubevirt/virt-launcher`. */
  readonly launcherImage?: string;
}

/** All informers and controllers of one virt-controller replica. */
export class VirtControllerApp {
  readonly #o: VirtControllerAppOptions;
  readonly #informers: Lifecycle[] = [];
  readonly #required: Lifecycle[] = [];
  readonly #queues: WorkQueue<ObjectKey>[] = [];
  readonly #runners: Promise<void>[] = [];
  readonly #recorders: EventRecorder[] = [];

  constructor(options: VirtControllerAppOptions) {
    this.#o = options;
  }

  /** Starts informers, waits for their first lists, then starts the controllers. Stop with {@link stop}. */
  async start(): Promise<void> {
    const { transport, logger } = this.#o;
    const c = {
      vms: resourceClient<VirtualMachine>(transport, KUBEVIRT_V1.virtualMachines),
      vmis: resourceClient<VirtualMachineInstance>(transport, KUBEVIRT_V1.virtualMachineInstances),
      migrations: resourceClient<VirtualMachineInstanceMigration>(
        transport,
        KUBEVIRT_V1.virtualMachineInstanceMigrations,
      ),
      pods: resourceClient<Pod>(transport, CORE_V1.pods),
      nodes: resourceClient<Node>(transport, CORE_V1.nodes),
    };
    const eventClient = resourceClient<CoreEvent>(transport, CORE_V1.events);
    const vms = this.#informer(
      new Informer<VirtualMachine>({ client: c.vms, logger, indexers: { namespace: namespaceIndex } }),
    );
    const vmis = this.#informer(
      new Informer<VirtualMachineInstance>({
        client: c.vmis,
        logger,
        indexers: {
          namespace: namespaceIndex,
          node: (v) => (v.status?.nodeName ? [v.status.nodeName] : []),
          claim: (v) =>
            (v.spec.volumes ?? []).flatMap((vol) => {
              const claim = claimOfVolume(vol);
              return claim === undefined ? [] : [objectKey(v.metadata?.namespace, claim)];
            }),
        },
      }),
    );
    // Claims: a VMI waits for its claims to exist, and volumeStatus shows their access modes and capacity.
    const claims = this.#informer(
      new Informer<PersistentVolumeClaim>({
        client: resourceClient(transport, CORE_V1.persistentVolumeClaims),
        logger,
      }),
    );
    const claim = (ns: string, name: string): PersistentVolumeClaimInfo | undefined => {
      const pvc = claims.store.get(objectKey(ns, name));
      return pvc ? claimInfo(pvc) : undefined;
    };
    const pods = this.#informer(
      new Informer<Pod>({
        client: c.pods,
        logger,
        selector: { labelSelector: `${LABEL.app}=virt-launcher` },
        indexers: { createdBy: labelIndex(LABEL.createdBy), migration: labelIndex(LABEL.migrationJob) },
      }),
    );
    const migrations = this.#informer(
      new Informer<VirtualMachineInstanceMigration>({
        client: c.migrations,
        logger,
        indexers: { vmi: migrationVmiIndex },
      }),
    );
    const nodes = this.#informer(new Informer<Node>({ client: c.nodes, logger }));
    // Policies and namespace labels only refine migrations: their informers start with the others but the
    // controllers do not wait for them (a cluster without the MigrationPolicy CRD still runs VMs).
    const policies = this.#informer(
      new Informer<MigrationPolicy>({ client: resourceClient(transport, KUBEVIRT_V1.migrationPolicies), logger }),
      false,
    );
    const namespaces = this.#informer(
      new Informer<KubeObject>({ client: resourceClient(transport, CORE_V1.namespaces), logger }),
      false,
    );
    // The KubeVirt CR: its configuration (useEmulation, migrations) is read at each use, so a change applies to the
    // next pod rendered. Required: a launcher pod rendered before it is known would request KVM on a cluster that
    // allows emulation.
    const kubevirts = this.#informer(
      new Informer<KubeVirt>({ client: resourceClient(transport, KUBEVIRT_V1.kubevirts), logger }),
    );
    const clusterConfig = (): KubeVirtConfiguration | undefined =>
      activeKubeVirt(kubevirts.store.list())?.spec.configuration;
    this.#o.metrics?.watch({ vmis, migrations });
    const recorder = (component: string): EventRecorder => this.#recorder(eventClient, component);
    const podsOfVmi = (uid: string): Pod[] => pods.store.byIndex("createdBy", uid);
    const activeFrom = (node: string): number =>
      migrations.store
        .list()
        .filter((m) => ACTIVE_PHASES.has(m.status?.phase ?? ""))
        .filter(
          (m) => vmis.store.get(objectKey(m.metadata?.namespace, m.spec.vmiName ?? ""))?.status?.nodeName === node,
        ).length;

    const vm = new VmController({
      vms: vms.store,
      vmis: vmis.store,
      vmClient: c.vms,
      vmiClient: c.vmis,
      recorder: recorder("virtualmachine-controller"),
      expectations: new Expectations(),
      instancetypes: new InstancetypeSync({ clientFor: (t) => resourceClient(transport, t), vmClient: c.vms }),
    });
    const vmQ = this.#queue("virt-controller-vm");
    const vmH = vm.handlers((k) => vmQ.add(k));
    vms.addHandlers(vmH.vm);
    vmis.addHandlers(vmH.vmi);

    const vmi = new VmiController({
      vmis: vmis.store,
      podsOf: podsOfVmi,
      vmiClient: c.vmis,
      podClient: c.pods,
      clusterConfig,
      claim,
      ...(this.#o.launcherImage ? { launcherImage: this.#o.launcherImage } : {}),
      recorder: recorder("virtualmachineinstance-controller"),
      expectations: new Expectations(),
    });
    const vmiQ = this.#queue("virt-controller-vmi");
    const vmiH = vmi.handlers((k) => vmiQ.add(k));
    vmis.addHandlers(vmiH.vmi);
    pods.addHandlers(vmiH.pod);
    const claimChanged = (pvc: PersistentVolumeClaim): void => {
      for (const v of vmis.store.byIndex("claim", keyOf(pvc))) vmiQ.add(keyOf(v));
    };
    claims.addHandlers({ onAdd: claimChanged, onUpdate: (_o, p) => claimChanged(p), onDelete: claimChanged });

    const migration = new MigrationController({
      migrations: migrations.store,
      migrationsOfVmi: (key) => migrations.store.byIndex("vmi", key),
      vmis: vmis.store,
      podsOfMigration: (uid) => pods.store.byIndex("migration", uid),
      podsOfVmi,
      policies: () => policies.store.list(),
      namespaceLabels: (ns) => namespaces.store.get(objectKey(undefined, ns))?.metadata?.labels ?? {},
      migrationClient: c.migrations,
      vmiClient: c.vmis,
      podClient: c.pods,
      clusterConfig,
      claim,
      ...(this.#o.launcherImage ? { launcherImage: this.#o.launcherImage } : {}),
      recorder: recorder("migration-controller"),
      expectations: new Expectations(),
    });
    const migQ = this.#queue("virt-controller-migration");
    const migH = migration.handlers((k) => migQ.add(k));
    migrations.addHandlers(migH.migration);
    pods.addHandlers(migH.pod);
    vmis.addHandlers(migH.vmi);

    const node = new NodeController({
      nodes: nodes.store,
      vmisOnNode: (n) => vmis.store.byIndex("node", n),
      podsOfVmi,
      nodeClient: c.nodes,
      vmiClient: c.vmis,
      recorder: recorder("node-controller"),
    });
    const nodeQ = this.#queue("virt-controller-node");
    const nodeH = node.handlers((k) => nodeQ.add(k));
    nodes.addHandlers(nodeH.node);
    vmis.addHandlers(nodeH.vmi);

    const evacuation = new EvacuationController({
      vmis: vmis.store,
      migrations: migrations.store,
      outboundFrom: activeFrom,
      migrationClient: c.migrations,
      recorder: recorder("evacuation-controller"),
      expectations: new Expectations(),
      clusterConfig,
      nodes: nodes.store,
      vmisOnNode: (n) => vmis.store.byIndex("node", n),
    });
    const evacQ = this.#queue("virt-controller-evacuation");
    const evacH = evacuation.handlers((k) => evacQ.add(k));
    vmis.addHandlers(evacH.vmi);
    migrations.addHandlers(evacH.migration);
    nodes.addHandlers(evacH.node);

    // VirtualMachineInstanceReplicaSets: not required, so a cluster without the CRD still runs VMs.
    const replicaSets = this.#informer(
      new Informer<VirtualMachineInstanceReplicaSet>({
        client: resourceClient(transport, KUBEVIRT_V1.virtualMachineInstanceReplicaSets),
        logger,
        indexers: { namespace: namespaceIndex },
      }),
      false,
    );
    const replicaSet = new ReplicaSetController({
      replicaSets: replicaSets.store,
      replicaSetsIn: (ns) => replicaSets.store.byIndex("namespace", ns),
      vmisIn: (ns) => vmis.store.byIndex("namespace", ns),
      rsClient: resourceClient(transport, KUBEVIRT_V1.virtualMachineInstanceReplicaSets),
      vmiClient: c.vmis,
      recorder: recorder("virtualmachinereplicaset-controller"),
      expectations: new Expectations(),
    });
    const rsQ = this.#queue("virt-controller-replicaset");
    const rsH = replicaSet.handlers((k) => rsQ.add(k));
    replicaSets.addHandlers(rsH.replicaSet);
    vmis.addHandlers(rsH.vmi);

    // VirtualMachinePools: not required either (a cluster without the pool CRD still runs VMs).
    const poolClient = resourceClient<VirtualMachinePool>(transport, KUBEVIRT_V1.virtualMachinePools);
    const pools = this.#informer(new Informer<VirtualMachinePool>({ client: poolClient, logger }), false);
    // Pool revisions (ControllerRevisions, indexed by their controller): what a pool's VMs were made from.
    const revisionClient = resourceClient<PoolRevision>(transport, CONTROLLER_REVISIONS);
    const revisions = this.#informer(
      new Informer<PoolRevision>({ client: revisionClient, logger, indexers: { owner: controllerOwnerIndex } }),
      false,
    );
    const poolRecorder = recorder("virtualmachinepool-controller");
    const poolExpectations = new Expectations();
    const pool = new PoolController({
      pools: pools.store,
      vms: vms.store,
      vmsIn: (ns) => vms.store.byIndex("namespace", ns),
      poolClient,
      vmClient: c.vms,
      recorder: poolRecorder,
      expectations: poolExpectations,
      updater: new PoolUpdater({
        revisions: revisions.store,
        revisionsOf: (uid) => revisions.store.byIndex("owner", uid),
        vmis: vmis.store,
        revisionClient,
        vmClient: c.vms,
        vmiClient: c.vmis,
        recorder: poolRecorder,
        expectations: poolExpectations,
      }),
    });
    const poolQ = this.#queue("virt-controller-pool");
    const poolH = pool.handlers((k) => poolQ.add(k));
    pools.addHandlers(poolH.pool);
    vms.addHandlers(poolH.vm);
    revisions.addHandlers(poolH.revision);
    vmis.addHandlers(poolH.vmi);
    this.#operatorDuties(transport, kubevirts, recorder("certificate-manager"));

    for (const i of this.#informers) i.start();
    await Promise.all(this.#required.map((i) => i.waitForSync()));
    logger.info({ informers: this.#informers.length }, "caches synced; starting controllers");
    const t = this.#o.threads;
    this.#run("vm", "VirtualMachine", vmQ, vm, t?.vm ?? 16);
    // A starting VMI's reconciles join the trace it was created in (the VM controller's, via the annotation).
    this.#run("vmi", "VirtualMachineInstance", vmiQ, vmi, t?.vmi ?? 32, (key) => {
      const v = vmis.store.get(key);
      const starting = STARTING_PHASES.has(v?.status?.phase ?? "");
      return starting ? contextFromTraceparent(v?.metadata?.annotations?.[ANNOTATION.traceparent]) : undefined;
    });
    // A migration's reconciles join the trace of the request that created it (virt-api's migrate subresource).
    this.#run("migration", "VirtualMachineInstanceMigration", migQ, migration, 3, (key) =>
      contextFromTraceparent(migrations.store.get(key)?.metadata?.annotations?.[ANNOTATION.traceparent]),
    );
    this.#run("node", "Node", nodeQ, node, 3);
    this.#run("evacuation", "VirtualMachineInstance", evacQ, evacuation, 3);
    this.#run("replicaset", "VirtualMachineInstanceReplicaSet", rsQ, replicaSet, 3);
    this.#run("pool", "VirtualMachinePool", poolQ, pool, 3);
  }

  /**
   * What virt-operator does on a KubeVirt install and we have no operator for: certificates, the CR's status, the
   * common-instancetypes deployment.
   */
  #operatorDuties(transport: RestTransport, kubevirts: Informer<KubeVirt>, recorder: EventRecorder): void {
    this.#certificates(transport, kubevirts, recorder);
    this.#kubevirtStatus(transport, kubevirts);
    this.#commonInstancetypes(transport, kubevirts);
  }

  /**
   * The common-instancetypes bundle, kept deployed while the KubeVirt CR asks for it (kubevirt/common-instancetypes.ts).
   * Woken by CR changes and by any change to a cluster instancetype or preference (an edit or a delete is undone).
   * Its informers are not required: the other controllers do not wait for them.
   */
  #commonInstancetypes(transport: RestTransport, kubevirts: Informer<KubeVirt>): void {
    const clients = new Map(
      BUNDLED_KINDS.map((k) => [k, resourceClient<ClusterObjectView>(transport, instancetypeResourceType(k))] as const),
    );
    const logger = this.#o.logger;
    const informers = new Map(
      BUNDLED_KINDS.map((k) => [
        k,
        this.#informer(new Informer<ClusterObjectView>({ client: clients.get(k)!, logger }), false),
      ]),
    );
    const controller = new CommonInstancetypesController({
      kubevirt: () => activeKubeVirt(kubevirts.store.list()),
      bundle: commonInstancetypes,
      stored: (kind) => informers.get(kind)!.store.list(),
      client: (kind) => clients.get(kind)!,
    });
    const queue = this.#queue("virt-controller-common-instancetypes");
    const key = objectKey(this.#o.namespace ?? KUBEVIRT_CR.namespace, KUBEVIRT_CR.name);
    const wake = { onAdd: () => queue.add(key), onUpdate: () => queue.add(key), onDelete: () => queue.add(key) };
    kubevirts.addHandlers(wake);
    for (const i of informers.values()) i.addHandlers(wake);
    void Promise.all([kubevirts, ...informers.values()].map((i) => i.waitForSync())).then(() => {
      if (queue.shuttingDown) return;
      queue.add(key);
      this.#run("common-instancetypes", "VirtualMachineClusterInstancetype", queue, controller, 1);
    });
  }

  /**
   * The certificate manager, woken by KubeVirt CR changes. It starts once the CR's cache has synced, before the other
   * controllers: the components wait for their certificates.
   */
  #certificates(transport: RestTransport, kubevirts: Informer<KubeVirt>, recorder: EventRecorder): void {
    const manager = new CertificateManager({
      namespace: this.#o.namespace ?? KUBEVIRT_CR.namespace,
      secrets: resourceClient(transport, CORE_V1.secrets),
      configMaps: resourceClient(transport, CORE_V1.configMaps),
      bundleTargets: {
        mutatingWebhookConfigurations: resourceClient(transport, BUNDLE_TARGET_TYPES.mutatingWebhookConfigurations),
        validatingWebhookConfigurations: resourceClient(transport, BUNDLE_TARGET_TYPES.validatingWebhookConfigurations),
        apiServices: resourceClient(transport, BUNDLE_TARGET_TYPES.apiServices),
      },
      selfSigned: () => activeKubeVirt(kubevirts.store.list())?.spec.certificateRotateStrategy?.selfSigned,
      recorder,
    });
    const queue = this.#queue("virt-controller-certificates");
    const key = objectKey(this.#o.namespace ?? KUBEVIRT_CR.namespace, CERTIFICATES.caSecret);
    // A change of the CR (its certificateRotateStrategy) is looked at at once; the manager requeues itself.
    kubevirts.addHandlers({ onAdd: () => queue.add(key), onUpdate: () => queue.add(key) });
    void kubevirts.waitForSync().then(() => {
      if (queue.shuttingDown) return;
      queue.add(key);
      this.#run("certificates", "Secret", queue, manager, 1);
    });
  }

  /**
   * The KubeVirt CR's status (phase, Available/Progressing/Degraded/Created), from the component workloads deploy/
   * installs: virt-operator's report, which `kubectl wait --for=condition=Available` reads. Woken by CR changes;
   * the controller polls the workloads itself.
   */
  #kubevirtStatus(transport: RestTransport, kubevirts: Informer<KubeVirt>): void {
    const namespace = this.#o.namespace ?? KUBEVIRT_CR.namespace;
    const controller = new KubeVirtStatusController({
      namespace,
      kubevirt: () => activeKubeVirt(kubevirts.store.list()),
      kubevirts: resourceClient(transport, KUBEVIRT_V1.kubevirts),
      deployments: resourceClient(transport, APPS_V1.deployments),
      daemonSets: resourceClient(transport, APPS_V1.daemonSets),
    });
    const queue = this.#queue("virt-controller-kubevirt-status");
    const key = objectKey(namespace, KUBEVIRT_CR.name);
    kubevirts.addHandlers({ onAdd: () => queue.add(key), onUpdate: () => queue.add(key) });
    void kubevirts.waitForSync().then(() => {
      if (queue.shuttingDown) return;
      queue.add(key);
      this.#run("kubevirt-status", "KubeVirt", queue, controller, 1);
    });
  }

  /** Stops the controllers (in-flight reconciles finish) and the informers; flushes pending events. */
  async stop(): Promise<void> {
    for (const q of this.#queues) q.shutDown();
    await Promise.all(this.#runners);
    for (const i of this.#informers) i.stop();
    await Promise.all(this.#recorders.map((r) => r.flush()));
  }

  /** Refreshes the in-flight workqueue gauges (call before a scrape). */
  updateMetrics(): void {
    for (const q of this.#queues) q.updateUnfinishedWork();
  }

  /** An event recorder for `component`, flushed on {@link stop}. */
  #recorder(events: ResourceClient<CoreEvent>, component: string): EventRecorder {
    const r = new EventRecorder({ events, component, logger: this.#o.logger, host: this.#o.host });
    this.#recorders.push(r);
    return r;
  }

  #informer<T extends Lifecycle>(informer: T, required = true): T {
    this.#informers.push(informer);
    if (required) this.#required.push(informer);
    return informer;
  }

  #queue(name: string): WorkQueue<ObjectKey> {
    const q = new WorkQueue<ObjectKey>({ name, registry: this.#o.registry });
    this.#queues.push(q);
    return q;
  }

  #run(
    controller: string,
    kind: string,
    queue: WorkQueue<ObjectKey>,
    reconciler: Reconciler,
    workers: number,
    parentOf?: (key: ObjectKey) => Context | undefined,
  ): void {
    const runner = new Runner({
      controller,
      kind,
      queue,
      reconciler,
      workers,
      logger: this.#o.logger,
      registry: this.#o.registry,
      metricPrefix: "kubevirt_virt_controller",
      tracer: this.#o.tracer,
      parentOf,
    });
    this.#runners.push(runner.run());
  }
}
