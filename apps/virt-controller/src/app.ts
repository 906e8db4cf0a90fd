/**
 * The controllers of virt-controller, wired: one informer per kind (shared by every controller), one workqueue and
 * runner per controller (KubeVirt's queue names and thread counts), started when this replica becomes leader.
 *
 * ```
 *   informers (VM, VMI, launcher Pods, VMIM, Node, MigrationPolicy) ──handlers──> queues ──runners──> controllers
 *                                    ^                                                                   │
 *                                    └──────────────────── API server (writes) <─────────────────────────┘
 * ```
 */
import type { ObjectKey, VirtualMachine, VirtualMachineInstance, VirtualMachineInstanceMigration } from "@kvt/api";
import {
  CORE_V1,
  type CoreEvent,
  controllerOwnerIndex,
  EventRecorder,
  Expectations,
  Informer,
  KUBEVIRT_V1,
  labelIndex,
  type Node,
  type Pod,
  type Reconciler,
  type RestTransport,
  Runner,
  resourceClient,
  WorkQueue,
} from "@kvt/kube";
import type { Tracer } from "@opentelemetry/api";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import { VmController } from "./vm/vm-controller.ts";
import { VmiController } from "./vmi/vmi-controller.ts";

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
  /** Worker counts; defaults as KubeVirt: vm 3, vmi 10. */
  readonly threads?: { vm?: number; vmi?: number };
  /** Host name for event sources. */
  readonly host?: string;
}

/** All informers and controllers of one virt-controller replica. */
export class VirtControllerApp {
  readonly #o: VirtControllerAppOptions;
  readonly #informers: Lifecycle[] = [];
  readonly #queues: WorkQueue<ObjectKey>[] = [];
  readonly #runners: Promise<void>[] = [];
  readonly #recorders: EventRecorder[] = [];

  constructor(options: VirtControllerAppOptions) {
    this.#o = options;
  }

  /** Starts informers, waits for their first lists, then starts the controllers. Stop with {@link stop}. */
  async start(): Promise<void> {
    const { transport, logger } = this.#o;
    const vmClient = resourceClient<VirtualMachine>(transport, KUBEVIRT_V1.virtualMachines);
    const vmiClient = resourceClient<VirtualMachineInstance>(transport, KUBEVIRT_V1.virtualMachineInstances);
    const podClient = resourceClient<Pod>(transport, CORE_V1.pods);
    const eventClient = resourceClient<CoreEvent>(transport, CORE_V1.events);

    const vms = this.#informer(new Informer<VirtualMachine>({ client: vmClient, logger }));
    const vmis = this.#informer(
      new Informer<VirtualMachineInstance>({
        client: vmiClient,
        logger,
        indexers: { node: (v) => (v.status?.nodeName ? [v.status.nodeName] : []), owner: controllerOwnerIndex },
      }),
    );
    const pods = this.#informer(
      new Informer<Pod>({
        client: podClient,
        logger,
        selector: { labelSelector: "kubevirt.io=virt-launcher" },
        indexers: {
          createdBy: labelIndex("kubevirt.io/created-by"),
          node: (p) => (p.spec?.nodeName ? [p.spec.nodeName] : []),
        },
      }),
    );
    // Watched now so the migration, node and evacuation controllers share them.
    this.#informer(
      new Informer<VirtualMachineInstanceMigration>({
        client: resourceClient(transport, KUBEVIRT_V1.virtualMachineInstanceMigrations),
        logger,
      }),
    );
    this.#informer(new Informer<Node>({ client: resourceClient(transport, CORE_V1.nodes), logger }));

    const recorder = (component: string): EventRecorder => {
      const r = new EventRecorder({ events: eventClient, component, logger, host: this.#o.host });
      this.#recorders.push(r);
      return r;
    };

    const vmController = new VmController({
      vms: vms.store,
      vmis: vmis.store,
      vmClient,
      vmiClient,
      recorder: recorder("virtualmachine-controller"),
      expectations: new Expectations(),
    });
    const vmQueue = this.#queue("virt-controller-vm");
    const vmHandlers = vmController.handlers((k) => vmQueue.add(k));
    vms.addHandlers(vmHandlers.vm);
    vmis.addHandlers(vmHandlers.vmi);

    const vmiController = new VmiController({
      vmis: vmis.store,
      podsOf: (uid) => pods.store.byIndex("createdBy", uid),
      vmiClient,
      podClient,
      recorder: recorder("virtualmachineinstance-controller"),
      expectations: new Expectations(),
    });
    const vmiQueue = this.#queue("virt-controller-vmi");
    const vmiHandlers = vmiController.handlers((k) => vmiQueue.add(k));
    vmis.addHandlers(vmiHandlers.vmi);
    pods.addHandlers(vmiHandlers.pod);

    for (const i of this.#informers) i.start();
    await Promise.all(this.#informers.map((i) => i.waitForSync()));
    logger.info({ informers: this.#informers.length }, "caches synced; starting controllers");
    this.#run("vm", "VirtualMachine", vmQueue, vmController, this.#o.threads?.vm ?? 3);
    this.#run("vmi", "VirtualMachineInstance", vmiQueue, vmiController, this.#o.threads?.vmi ?? 10);
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

  #informer<T extends Lifecycle>(informer: T): T {
    this.#informers.push(informer);
    return informer;
  }

  #queue(name: string): WorkQueue<ObjectKey> {
    const q = new WorkQueue<ObjectKey>({ name, registry: this.#o.registry });
    this.#queues.push(q);
    return q;
  }

  #run(controller: string, kind: string, queue: WorkQueue<ObjectKey>, reconciler: Reconciler, workers: number): void {
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
    });
    this.#runners.push(runner.run());
  }
}
