/**
 * The node heartbeat, as KubeVirt's virt-handler writes it (heartbeat.go): every period the Node gets
 * `kubevirt.io/heartbeat=<RFC 3339 now>` (annotation) and `kubevirt.io/schedulable=true|false` (label). The node is
 * schedulable only while every device plugin is registered with the kubelet (the kubelet, not this heartbeat, puts
 * `devices.kubevirt.io/*` into the Node's capacity from the plugins' device lists); the first beat waits up to 10 s
 * for them. Stopping marks the node unschedulable, so no new VMI lands on a handler that left. virt-controller's node
 * controller fails the VMIs of a node whose heartbeat is older than 5 minutes.
 */
import { ANNOTATION, LABEL } from "@kvt/api";
import type { Logger } from "@kvt/observability";

/** KubeVirt's heartbeat period (1 min; jittered). */
export const HEARTBEAT_PERIOD_MS = 60_000;
/** First retry delay after a failed heartbeat. */
const RETRY_MS = 1000;
/** How long the first beat waits for the device plugins, and how often it looks (KubeVirt's 10 s and 1 s). */
const DEVICE_PLUGIN_WAIT_MS = 10_000;
const DEVICE_PLUGIN_POLL_MS = 1000;

/** Merge-patches a Node's metadata. */
export interface NodePatcher {
  patchNode(name: string, patch: Record<string, unknown>): Promise<unknown>;
}

/** Whether this node's device plugins are registered with the kubelet (device-manager/device-controller.ts). */
export interface DevicePluginsState {
  initialized(): boolean;
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

/** Sends heartbeats until stopped. */
export class NodeHeartbeat {
  readonly #nodeName: string;
  readonly #api: NodePatcher;
  readonly #logger: Logger;
  readonly #periodMs: number;
  readonly #devicePlugins: DevicePluginsState;
  readonly #devicePluginWaitMs: number;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #watch: ReturnType<typeof setInterval> | undefined;
  /** The schedulable label last written (undefined before the first beat). */
  #written: boolean | undefined;
  #stopped = false;

  constructor(options: {
    nodeName: string;
    api: NodePatcher;
    logger: Logger;
    periodMs?: number;
    /** The node's device plugins; none: the node is schedulable whenever this handler runs. */
    devicePlugins?: DevicePluginsState;
    devicePluginWaitMs?: number;
  }) {
    this.#nodeName = options.nodeName;
    this.#api = options.api;
    this.#logger = options.logger;
    this.#periodMs = options.periodMs ?? HEARTBEAT_PERIOD_MS;
    this.#devicePlugins = options.devicePlugins ?? { initialized: () => true };
    this.#devicePluginWaitMs = options.devicePluginWaitMs ?? DEVICE_PLUGIN_WAIT_MS;
  }

  /**
   * Gives the device plugins up to 10 s to register, beats once (awaited, so the node is schedulable before VMIs
   * arrive), then every period with 1.2x jitter. A failed beat is retried sooner (1 s, doubling, at most the
   * period): the first one can race the kubelet registering the Node, and until it succeeds no VMI can be
   * scheduled here. When the device plugins come or go between beats (a kubelet restart), it beats at once, so the
   * label follows within a second rather than a period.
   */
  async start(): Promise<void> {
    const waitUntil = Date.now() + this.#devicePluginWaitMs;
    while (!this.#devicePlugins.initialized() && Date.now() < waitUntil && !this.#stopped)
      await new Promise((r) => setTimeout(r, Math.min(DEVICE_PLUGIN_POLL_MS, this.#devicePluginWaitMs)));
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
    this.#watch = setInterval(() => {
      if (this.#written !== undefined && this.#written !== this.#devicePlugins.initialized()) void this.beat(true);
    }, DEVICE_PLUGIN_POLL_MS);
    this.#watch.unref();
  }

  /**
   * One heartbeat, schedulable when asked and the device plugins are registered; failures are logged (and retried
   * by start()'s loop). True when it was written.
   */
  async beat(schedulable: boolean): Promise<boolean> {
    try {
      const ready = schedulable && this.#devicePlugins.initialized();
      await this.#api.patchNode(this.#nodeName, heartbeatPatch(new Date(), ready));
      this.#written = ready;
      return true;
    } catch (error) {
      this.#logger.warn({ err: error, node: this.#nodeName }, "node heartbeat failed; retrying");
      return false;
    }
  }

  /** Stops beating and marks the node unschedulable. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    clearInterval(this.#watch);
    await this.beat(false);
  }
}
