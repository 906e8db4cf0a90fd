/**
 * The local cluster's scheduler: binds each pending pod (no spec.nodeName, default scheduler, not deleting) to a
 * node through the `pods/binding` subresource, as kube-scheduler does; a pod that fits nowhere gets the condition
 * PodScheduled=False, reason Unschedulable, with the per-node reasons, and is retried when nodes or pods change
 * (and every 5 s).
 */
import {
  type CoreV1Api,
  type KubeConfig,
  type KubernetesObject,
  PatchStrategy,
  type StorageV1Api,
  setHeaderOptions,
  type V1Node,
  type V1PersistentVolume,
  type V1PersistentVolumeClaim,
  type V1Pod,
  type V1StorageClass,
} from "@kubernetes/client-node";
import type { Logger } from "@kvt/observability";
import { makeInformer } from "../cluster/informer.ts";
import { ANN, volumeAllowsNode } from "../volumes/volume-match.ts";
import type { QuantityParser } from "./predicates.ts";
import { schedulePod } from "./schedule.ts";

/** The name pods use to ask for this scheduler (and pods with no schedulerName). */
export const SCHEDULER_NAME = "default-scheduler";
const RETRY_MS = 5000;
/** How long PreBind waits for a pod's delayed claims to be bound (kube-scheduler's bind-timeout is 600 s). */
export const VOLUME_BIND_TIMEOUT_MS = 600_000;

/** What the scheduler needs. */
export interface SchedulerOptions {
  readonly kubeConfig: KubeConfig;
  readonly core: CoreV1Api;
  readonly parseQuantity: QuantityParser;
  readonly log: Logger;
  /** StorageClasses come from here; without it, claims and volumes are not looked at. */
  readonly storage?: StorageV1Api;
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

/** Binds pending pods to nodes until stopped. */
export class Scheduler {
  readonly #o: SchedulerOptions;
  readonly #pods = makeInformerOf<V1Pod>();
  readonly #nodes = makeInformerOf<V1Node>();
  readonly #claims = makeInformerOf<V1PersistentVolumeClaim>();
  readonly #volumes = makeInformerOf<V1PersistentVolume>();
  readonly #classes = makeInformerOf<V1StorageClass>();
  /** Bindings made but not yet seen in the watch: they count as bound so two pods don't take one slot. */
  readonly #assumed = new Map<string, V1Pod>();
  readonly #lastMessage = new Map<string, string>();
  #timer: ReturnType<typeof setInterval> | undefined;
  #running = false;
  #again = false;

  constructor(options: SchedulerOptions) {
    this.#o = options;
  }

  /** Starts the watches; resolves once both caches are filled. */
  async start(): Promise<void> {
    const { kubeConfig, core } = this.#o;
    this.#pods.informer = makeInformer<V1Pod>(kubeConfig, "/api/v1/pods", () => core.listPodForAllNamespaces());
    this.#nodes.informer = makeInformer<V1Node>(kubeConfig, "/api/v1/nodes", () => core.listNode());
    const watch = (inf: {
      on(verb: "add" | "update" | "delete", cb: () => void): void;
      on(verb: "error", cb: (err: unknown) => void): void;
      start(): Promise<void>;
    }): void => {
      inf.on("add", () => this.#kick());
      inf.on("update", () => this.#kick());
      inf.on("delete", () => this.#kick());
      inf.on("error", (err: unknown) => {
        this.#o.log.warn({ err }, "scheduler watch failed; restarting it in 1s");
        setTimeout(() => void inf.start().catch(() => undefined), 1000);
      });
    };
    watch(this.#pods.informer);
    watch(this.#nodes.informer);
    const informers = [this.#pods.informer, this.#nodes.informer];
    const storage = this.#o.storage;
    if (storage) {
      this.#claims.informer = makeInformer<V1PersistentVolumeClaim>(kubeConfig, "/api/v1/persistentvolumeclaims", () =>
        core.listPersistentVolumeClaimForAllNamespaces(),
      );
      this.#volumes.informer = makeInformer<V1PersistentVolume>(kubeConfig, "/api/v1/persistentvolumes", () =>
        core.listPersistentVolume(),
      );
      this.#classes.informer = makeInformer<V1StorageClass>(kubeConfig, "/apis/storage.k8s.io/v1/storageclasses", () =>
        storage.listStorageClass(),
      );
      for (const inf of [this.#claims.informer, this.#volumes.informer, this.#classes.informer]) {
        watch(inf);
        informers.push(inf as never);
      }
    }
    await Promise.all(informers.map((i) => i.start()));
    this.#timer = setInterval(() => this.#kick(), RETRY_MS);
    this.#kick();
  }

  /** Stops watching. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    const holders: { informer?: { stop(): Promise<void> } }[] = [
      this.#pods,
      this.#nodes,
      this.#claims,
      this.#volumes,
      this.#classes,
    ];
    await Promise.all(holders.map((x) => x.informer?.stop() ?? Promise.resolve()));
  }

  #kick(): void {
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
    const pods = this.#pods.informer?.list() ?? [];
    const nodes = this.#nodes.informer?.list() ?? [];
    for (const p of pods) if (p.spec?.nodeName) this.#assumed.delete(p.metadata?.uid ?? "");
    const bound = [...pods.filter(holdsResources), ...this.#assumed.values()];
    const pending = pods.filter((p) => isPending(p) && !this.#assumed.has(p.metadata?.uid ?? ""));
    pending.sort((a, b) => String(a.metadata?.creationTimestamp).localeCompare(String(b.metadata?.creationTimestamp)));
    const volumes = this.#o.storage
      ? {
          claims: this.#claims.informer?.list() ?? [],
          volumes: this.#volumes.informer?.list() ?? [],
          classes: this.#classes.informer?.list() ?? [],
        }
      : undefined;
    for (const pod of pending) {
      const result = schedulePod(pod, { nodes, boundPods: bound, volumes }, this.#o.parseQuantity);
      if ("nodeName" in result && result.delayedClaims) {
        // PreBind runs apart from the pass (as kube-scheduler's binding cycle): the pod is assumed on its node
        // meanwhile, so it holds its resources and is not scheduled twice.
        const assumed = { ...pod, spec: { ...pod.spec!, nodeName: result.nodeName } };
        this.#assumed.set(pod.metadata!.uid!, assumed);
        bound.push(assumed);
        void this.#bindWithVolumes(pod, result.nodeName, result.delayedClaims);
      } else if ("nodeName" in result) {
        if (await this.#bind(pod, result.nodeName)) {
          const assumed = { ...pod, spec: { ...pod.spec!, nodeName: result.nodeName } };
          this.#assumed.set(pod.metadata!.uid!, assumed);
          bound.push(assumed);
        }
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
    const key = (c: KubernetesObject): string => `${c.metadata?.namespace ?? ""}/${c.metadata?.name ?? ""}`;
    try {
      for (const claim of claims) {
        if (claim.metadata?.annotations?.[ANN.selectedNode] === nodeName) continue;
        await this.#o.core.patchNamespacedPersistentVolumeClaim(
          {
            name: claim.metadata!.name!,
            namespace: claim.metadata!.namespace!,
            body: { metadata: { annotations: { [ANN.selectedNode]: nodeName } } },
          },
          setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
        );
      }
      const wanted = new Set(claims.map(key));
      const deadline = Date.now() + VOLUME_BIND_TIMEOUT_MS;
      for (;;) {
        const current = (this.#claims.informer?.list() ?? []).filter((c) => wanted.has(key(c)));
        if (current.length === wanted.size && current.every((c) => c.spec?.volumeName && c.status?.phase === "Bound")) {
          this.#checkBoundVolumesReach(current, nodeName);
          break;
        }
        const stillPending = (this.#pods.informer?.list() ?? []).some((p) => p.metadata?.uid === uid && isPending(p));
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
    const node = this.#nodes.informer?.list().find((n) => n.metadata?.name === nodeName);
    for (const claim of claims) {
      const volume = this.#volumes.informer?.list().find((v) => v.metadata?.name === claim.spec?.volumeName);
      if (node && volume && !volumeAllowsNode(volume, node))
        throw new Error(`claim ${claim.metadata?.name ?? ""} was bound to a volume node ${nodeName} cannot reach`);
    }
  }

  async #bind(pod: V1Pod, nodeName: string): Promise<boolean> {
    const name = pod.metadata!.name!;
    const namespace = pod.metadata!.namespace ?? "default";
    try {
      await this.#o.core.createNamespacedPodBinding({
        name,
        namespace,
        body: {
          apiVersion: "v1",
          kind: "Binding",
          metadata: { name, namespace, uid: pod.metadata?.uid },
          target: { apiVersion: "v1", kind: "Node", name: nodeName },
        },
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
      lastTransitionTime: new Date(),
    };
    const others = (pod.status?.conditions ?? []).filter((c) => c.type !== "PodScheduled");
    try {
      await this.#o.core.patchNamespacedPodStatus(
        {
          name: pod.metadata!.name!,
          namespace: pod.metadata!.namespace ?? "default",
          body: { status: { phase: "Pending", conditions: [...others, condition] } },
        },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
      this.#o.log.info({ pod: `${pod.metadata!.namespace}/${pod.metadata!.name}`, message }, "pod unschedulable");
    } catch (err) {
      this.#lastMessage.delete(uid);
      this.#o.log.debug({ err }, "could not record Unschedulable; retrying at the next pass");
    }
  }
}

function makeInformerOf<T extends KubernetesObject>(): { informer?: ReturnType<typeof makeInformer<T>> } {
  return {};
}
