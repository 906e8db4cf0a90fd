/**
 * The local cluster's scheduler: binds each pending pod (no spec.nodeName, default scheduler, not deleting) to a
 * node through the `pods/binding` subresource, as kube-scheduler does; a pod that fits nowhere gets the condition
 * PodScheduled=False, reason Unschedulable, with the per-node reasons, and is retried when nodes or pods change
 * (and every 5 s).
 */
import {
  type CoreV1Api,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1Node,
  type V1Pod,
} from "@kubernetes/client-node";
import type { Logger } from "@kvt/observability";
import { makeInformer } from "../cluster/informer.ts";
import type { QuantityParser } from "./predicates.ts";
import { schedulePod } from "./schedule.ts";

/** The name pods use to ask for this scheduler (and pods with no schedulerName). */
export const SCHEDULER_NAME = "default-scheduler";
const RETRY_MS = 5000;

/** What the scheduler needs. */
export interface SchedulerOptions {
  readonly kubeConfig: KubeConfig;
  readonly core: CoreV1Api;
  readonly parseQuantity: QuantityParser;
  readonly log: Logger;
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
    await Promise.all([this.#pods.informer.start(), this.#nodes.informer.start()]);
    this.#timer = setInterval(() => this.#kick(), RETRY_MS);
    this.#kick();
  }

  /** Stops watching. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await Promise.all([this.#pods.informer?.stop(), this.#nodes.informer?.stop()]);
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
    for (const pod of pending) {
      const result = schedulePod(pod, { nodes, boundPods: bound }, this.#o.parseQuantity);
      if ("nodeName" in result) {
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

function makeInformerOf<T extends V1Pod | V1Node>(): { informer?: ReturnType<typeof makeInformer<T>> } {
  return {};
}
