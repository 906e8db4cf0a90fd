/**
 * The node heartbeat, as KubeVirt's virt-handler writes it (heartbeat.go): every period the Node gets
 * `kubevirt.io/heartbeat=<RFC 3339 now>` (annotation) and `kubevirt.io/schedulable=true|false` (label), and its
 * status advertises the `devices.kubevirt.io/kvm` capacity (KubeVirt's device plugin offers 1k slots) when
 * /dev/kvm can be opened. Stopping marks the node unschedulable, so no new VMI lands on a handler that left.
 * virt-controller's node controller fails the VMIs of a node whose heartbeat is older than 5 minutes.
 */
import { accessSync, constants } from "node:fs";
import { ANNOTATION, KVM_DEVICE_RESOURCE, LABEL } from "@kvt/api";
import type { Logger } from "@kvt/observability";

/** How many VMIs may use /dev/kvm on a node (KubeVirt's device plugin advertises 1000). */
export const KVM_CAPACITY = "1k";
/** KubeVirt's heartbeat period (1 min; jittered). */
export const HEARTBEAT_PERIOD_MS = 60_000;
/** First retry delay after a failed heartbeat. */
const RETRY_MS = 1000;

/** Merge-patches a Node (metadata and status separately, as the API requires). */
export interface NodePatcher {
  patchNode(name: string, patch: Record<string, unknown>): Promise<unknown>;
  patchNodeStatus(name: string, patch: Record<string, unknown>): Promise<unknown>;
}

/** True when this host can open /dev/kvm for reading and writing. */
export function kvmAvailable(path = "/dev/kvm"): boolean {
  try {
    accessSync(path, constants.R_OK | constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

/** The metadata patch of one heartbeat (pure). */
export function heartbeatPatch(now: Date, schedulable: boolean): Record<string, unknown> {
  return {
    metadata: {
      labels: { [LABEL.schedulable]: String(schedulable) },
      annotations: { [ANNOTATION.heartbeat]: `${now.toISOString().slice(0, 19)}Z` },
    },
  };
}

/** The status patch advertising the KVM device (pure); zero when /dev/kvm is unusable. */
export function capacityPatch(kvm: boolean): Record<string, unknown> {
  const amount = kvm ? KVM_CAPACITY : "0";
  return { status: { capacity: { [KVM_DEVICE_RESOURCE]: amount }, allocatable: { [KVM_DEVICE_RESOURCE]: amount } } };
}

/** Sends heartbeats until stopped. */
export class NodeHeartbeat {
  readonly #nodeName: string;
  readonly #api: NodePatcher;
  readonly #logger: Logger;
  readonly #periodMs: number;
  readonly #kvm: boolean;
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(options: { nodeName: string; api: NodePatcher; logger: Logger; periodMs?: number; kvm?: boolean }) {
    this.#nodeName = options.nodeName;
    this.#api = options.api;
    this.#logger = options.logger;
    this.#periodMs = options.periodMs ?? HEARTBEAT_PERIOD_MS;
    this.#kvm = options.kvm ?? kvmAvailable();
  }

  /**
   * Beats once (awaited, so the node is schedulable before VMIs arrive), then every period with 1.2x jitter. A
   * failed beat is retried sooner (1 s, doubling, at most the period): the first one can race the kubelet
   * registering the Node, and until it succeeds no VMI can be scheduled here.
   */
  async start(): Promise<void> {
    let failures = (await this.beat(true)) ? 0 : 1;
    const next = (): void => {
      const delay =
        failures > 0
          ? Math.min(this.#periodMs, RETRY_MS * 2 ** (failures - 1))
          : this.#periodMs * (1 + Math.random() * 0.2);
      this.#timer = setTimeout(() => {
        void this.beat(true).then((ok) => {
          failures = ok ? 0 : failures + 1;
          next();
        }); // beat() never rejects: it logs its own failures
      }, delay);
      this.#timer.unref();
    };
    next();
  }

  /** One heartbeat; failures are logged (and retried by start()'s loop). True when it was written. */
  async beat(schedulable: boolean): Promise<boolean> {
    try {
      await this.#api.patchNode(this.#nodeName, heartbeatPatch(new Date(), schedulable));
      await this.#api.patchNodeStatus(this.#nodeName, capacityPatch(this.#kvm));
      return true;
    } catch (error) {
      this.#logger.warn({ err: error, node: this.#nodeName }, "node heartbeat failed; retrying");
      return false;
    }
  }

  /** Stops beating and marks the node unschedulable. */
  async stop(): Promise<void> {
    clearTimeout(this.#timer);
    await this.beat(false);
  }
}
