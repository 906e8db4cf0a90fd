/**
 * The local cluster's scheduler: binds each pending pod (no spec.nodeName, default scheduler, not deleting) to a
 * node through the `pods/binding` subresource, as kube-scheduler does; a pod that fits nowhere gets the condition
 * PodScheduled=False, reason Unschedulable, with the per-node reasons, and is retried when nodes or pods change
 * (and every 5 s).
 */
import {
  CORE_V1,
  Informer,
  type KubeObject,
  type ResourceClient,
  type ResourceType,
  type RestTransport,
  resourceClient,
} from "@kvt/kube";
import type { Logger } from "@kvt/observability";
import type {
  V1Node,
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1Pod,
  V1StorageClass,
} from "../cluster/kube-models.ts";
import { ANN, volumeAllowsNode } from "../volumes/volume-match.ts";
import { indexByNode, type QuantityParser } from "./predicates.ts";
import { schedulePod } from "./schedule.ts";

/** The name pods use to ask for this scheduler (and pods with no schedulerName). */
export const SCHEDULER_NAME = "default-scheduler";
const RETRY_MS = 5000;
/** How long PreBind waits for a pod's delayed claims to be bound (kube-scheduler's bind-timeout is 600 s). */
export const VOLUME_BIND_TIMEOUT_MS = 600_000;

/** What the scheduler needs. */
export interface SchedulerOptions {
  /** The API server (a @kvt/kube RestClient). */
  readonly transport: RestTransport;
  readonly parseQuantity: QuantityParser;
  readonly log: Logger;
  /** Watch claims, volumes and StorageClasses (the VolumeBinding plugin); default true. */
  readonly volumes?: boolean;
}

function isPending(pod: V1Pod): boolean {
  return (
    !pod.spec?.nodeName &&
    !pod.metadata?.deletionTimestamp &&
    (pod.spec?.schedulerName ?? SCHEDULER_NAME) === SCHEDULER_NAME &&
    pod.status?.phase !== "Succeeded" &&
    pod.status?.phase !== "Failed"
  );
}

function holdsResources(pod: V1Pod): boolean {
  return !!pod.spec?.nodeName && pod.status?.phase !== "Succeeded" && pod.status?.phase !== "Failed";
}

/** The storage objects the VolumeBinding plugin watches. */
interface StorageInformers {
  readonly claims: Informer<V1PersistentVolumeClaim>;
  readonly volumes: Informer<V1PersistentVolume>;
  readonly classes: Informer<V1StorageClass>;
}

/** Binds pending pods to nodes until stopped. */
export class Scheduler {
  readonly #o: SchedulerOptions;
  readonly #podClient: ResourceClient<V1Pod>;
  readonly #claimClient: ResourceClient<V1PersistentVolumeClaim>;
  readonly #pods: Informer<V1Pod>;
  readonly #nodes: Informer<V1Node>;
  /** Claims, volumes and classes; none when the options turn volumes off. */
  readonly #storage: StorageInformers | undefined;
  /** Bindings made but not yet seen in the watch: they count as bound so two pods don't take one slot. */
  readonly #assumed = new Map<string, V1Pod>();
  readonly #lastMessage = new Map<string, string>();
  #timer: ReturnType<typeof setInterval> | undefined;
  /** Passes wait for every cache to be filled: a pod is never judged against half a node list. */
  #synced = false;
  #running = false;
  #again = false;

  constructor(options: SchedulerOptions) {
    this.#o = options;
    const informer = <T extends KubeObject>(type: ResourceType): Informer<T> =>
      new Informer<T>({
        client: resourceClient<T>(options.transport, type),
        logger: options.log.child({ informer: type.plural }),
      });
    this.#podClient = resourceClient<V1Pod>(options.transport, CORE_V1.pods);
    this.#claimClient = resourceClient<V1PersistentVolumeClaim>(options.transport, CORE_V1.persistentVolumeClaims);
    this.#pods = informer<V1Pod>(CORE_V1.pods);
    this.#nodes = informer<V1Node>(CORE_V1.nodes);
    this.#storage =
      options.volumes === false
        ? undefined
        : {
            claims: informer<V1PersistentVolumeClaim>(CORE_V1.persistentVolumeClaims),
            volumes: informer<V1PersistentVolume>(CORE_V1.persistentVolumes),
            classes: informer<V1StorageClass>(CORE_V1.storageClasses),
          };
  }

  #informers(): Informer<KubeObject>[] {
    const s = this.#storage;
    return [this.#pods, this.#nodes, ...(s ? [s.claims, s.volumes, s.classes] : [])] as Informer<KubeObject>[];
  }

  /** Starts the watches; resolves once every cache is filled. */
  async start(): Promise<void> {
    const kick = (): void => this.#kick();
    const informers = this.#informers();
    for (const inf of informers) {
      // Lists and watches are retried by the informer itself (backoff, relist on 410).
      inf.addHandlers({ onAdd: kick, onUpdate: kick, onDelete: kick });
      inf.start();
    }
    await Promise.all(informers.map((i) => i.waitForSync()));
    this.#synced = true;
    this.#timer = setInterval(kick, RETRY_MS);
    this.#kick();
  }

  /** Stops watching. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    for (const inf of this.#informers()) inf.stop();
  }

  #kick(): void {
    if (!this.#synced) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = true;
    void this.#pass().finally(() => {
      this.#running = false;
      if (this.#again) {
        this.#again = false;
        this.#kick();
      }
    });
  }

  async #pass(): Promise<void> {
    const pods = this.#pods.store.list();
    const nodes = this.#nodes.store.list();
    for (const p of pods) if (p.spec?.nodeName) this.#assumed.delete(p.metadata?.uid ?? "");
    const bound = [...pods.filter(holdsResources), ...this.#assumed.values()];
    const podsByNode = indexByNode(bound);
    const assume = (pod: V1Pod, nodeName: string): void => {
      const assumed = { ...pod, spec: { ...pod.spec!, nodeName } };
      this.#assumed.set(pod.metadata!.uid!, assumed);
      bound.push(assumed);
      const onNode = podsByNode.get(nodeName);
      if (onNode) onNode.push(assumed);
      else podsByNode.set(nodeName, [assumed]);
    };
    const pending = pods.filter((p) => isPending(p) && !this.#assumed.has(p.metadata?.uid ?? ""));
    pending.sort((a, b) => String(a.metadata?.creationTimestamp).localeCompare(String(b.metadata?.creationTimestamp)));
    const storage = this.#storage;
    const volumes = storage
      ? {
          claims: storage.claims.store.list(),
          volumes: storage.volumes.store.list(),
          classes: storage.classes.store.list(),
        }
      : undefined;
    for (const pod of pending) {
      const result = schedulePod(pod, { nodes, boundPods: bound, podsByNode, volumes }, this.#o.parseQuantity);
      if ("nodeName" in result && result.delayedClaims) {
        // PreBind runs apart from the pass (as kube-scheduler's binding cycle): the pod is assumed on its node
        // meanwhile, so it holds its resources and is not scheduled twice.
        assume(pod, result.nodeName);
        void this.#bindWithVolumes(pod, result.nodeName, result.delayedClaims);
      } else if ("nodeName" in result) {
        if (await this.#bind(pod, result.nodeName)) assume(pod, result.nodeName);
      } else {
        await this.#markUnschedulable(pod, result.unschedulable);
      }
    }
  }

  /**
   * PreBind of the VolumeBinding plugin: names `nodeName` on each delayed claim (the provisioner then makes its
   * volume there), waits until every claim is bound, then binds the pod. On failure the pod is un-assumed and
   * scheduled again at the next pass.
   */
  async #bindWithVolumes(pod: V1Pod, nodeName: string, claims: readonly V1PersistentVolumeClaim[]): Promise<void> {
    const uid = pod.metadata!.uid!;
    const key = (c: KubeObject): string => `${c.metadata?.namespace ?? ""}/${c.metadata?.name ?? ""}`;
    try {
      for (const claim of claims) {
        if (claim.metadata?.annotations?.[ANN.selectedNode] === nodeName) continue;
        await this.#claimClient.mergePatch(claim.metadata!.namespace!, claim.metadata!.name!, {
          metadata: { annotations: { [ANN.selectedNode]: nodeName } },
        });
      }
      const wanted = new Set(claims.map(key));
      const deadline = Date.now() + VOLUME_BIND_TIMEOUT_MS;
      for (;;) {
        const current = (this.#storage?.claims.store.list() ?? []).filter((c) => wanted.has(key(c)));
        if (current.length === wanted.size && current.every((c) => c.spec?.volumeName && c.status?.phase === "Bound")) {
          this.#checkBoundVolumesReach(current, nodeName);
          break;
        }
        const stillPending = this.#pods.store.list().some((p) => p.metadata?.uid === uid && isPending(p));
        if (!stillPending) throw new Error("the pod is gone or was bound by someone else");
        if (Date.now() > deadline) throw new Error("timed out waiting for the condition");
        await new Promise((r) => setTimeout(r, 100));
      }
      if (!(await this.#bind(pod, nodeName))) this.#assumed.delete(uid);
    } catch (err) {
      this.#assumed.delete(uid);
      this.#o.log.warn({ err, pod: key(pod), node: nodeName }, "binding volumes failed; rescheduling the pod");
      this.#kick();
    }
  }

  /** Throws when a claim got bound meanwhile to a volume `nodeName` cannot reach (another pod chose its node). */
  #checkBoundVolumesReach(claims: readonly V1PersistentVolumeClaim[], nodeName: string): void {
    const node = this.#nodes.store.list().find((n) => n.metadata?.name === nodeName);
    for (const claim of claims) {
      const volume = this.#storage?.volumes.store.list().find((v) => v.metadata?.name === claim.spec?.volumeName);
      if (node && volume && !volumeAllowsNode(volume, node))
        throw new Error(`claim ${claim.metadata?.name ?? ""} was bound to a volume node ${nodeName} cannot reach`);
    }
  }

  async #bind(pod: V1Pod, nodeName: string): Promise<boolean> {
    const name = pod.metadata!.name!;
    const namespace = pod.metadata!.namespace ?? "default";
    try {
      await this.#podClient.createSubresource(namespace, name, "binding", {
        apiVersion: "v1",
        kind: "Binding",
        metadata: { name, namespace, uid: pod.metadata?.uid },
        target: { apiVersion: "v1", kind: "Node", name: nodeName },
      });
      this.#o.log.info({ pod: `${namespace}/${name}`, node: nodeName }, "bound pod");
      this.#lastMessage.delete(pod.metadata!.uid!);
      return true;
    } catch (err) {
      // Conflict: someone bound or deleted it first; the next pass sees the new state.
      this.#o.log.warn({ err, pod: `${namespace}/${name}` }, "binding failed");
      return false;
    }
  }

  async #markUnschedulable(pod: V1Pod, message: string): Promise<void> {
    const uid = pod.metadata!.uid!;
    if (this.#lastMessage.get(uid) === message) return;
    this.#lastMessage.set(uid, message);
    const condition = {
      type: "PodScheduled",
      status: "False",
      reason: "Unschedulable",
      message,
      lastTransitionTime: new Date().toISOString(),
    };
    const others = (pod.status?.conditions ?? []).filter((c) => c.type !== "PodScheduled");
    try {
      await this.#podClient.mergePatch(
        pod.metadata!.namespace ?? "default",
        pod.metadata!.name!,
        { status: { phase: "Pending", conditions: [...others, condition] } },
        "status",
      );
      this.#o.log.info({ pod: `${pod.metadata!.namespace}/${pod.metadata!.name}`, message }, "pod unschedulable");
    } catch (err) {
      this.#lastMessage.delete(uid);
      this.#o.log.debug({ err }, "could not record Unschedulable; retrying at the next pass");
    }
  }
}
