/**
 * One kubelet device plugin for one host device node, as KubeVirt's GenericDevicePlugin (device-manager/
 * generic_device.go): `devices.kubevirt.io/<name>` offered as `maxDevices` interchangeable slots (`<name>0` ...), all
 * Healthy while the device node exists on the host and all Unhealthy while it does not; Allocate hands each
 * container the node itself (DeviceSpec container path = host path = the device path, cgroup permissions as given).
 *
 *   run(signal):  remove a stale socket -> (tun, vhost-net: open and close the node, so the kernel loads the module)
 *                 -> serve DevicePlugin on <dir>/kubevirt-<name>.sock -> Register with <dir>/kubelet.sock
 *                 -> every pollMs: device node appeared/disappeared -> send the list again (health)
 *                                  our socket removed, or kubelet.sock replaced -> the kubelet restarted: return
 *                 -> on return or abort: send an empty list (the kubelet drops the devices at once), stop serving
 *   The caller (DeviceController) runs it again, so a restarted kubelet gets a fresh registration.
 */
import { closeSync, existsSync, openSync, statSync } from "node:fs";
import { basename, join } from "node:path";
import {
  type AllocateResponse,
  API_VERSION,
  type Device,
  DevicePluginError,
  type DevicePluginService,
  HEALTHY,
  KUBELET_SOCKET,
  type ListAndWatchResponse,
  register,
  serveDevicePlugin,
  UNHEALTHY,
} from "@kvt/device-plugin";
import type { Logger } from "@kvt/observability";

/** The resource name prefix of KubeVirt's device plugins. */
export const DEVICE_NAMESPACE = "devices.kubevirt.io";
/** How often the device node and the sockets are checked (KubeVirt watches them with inotify). */
export const DEVICE_POLL_MS = 1000;
/** How long a stopping plugin waits for the kubelet to read its empty list (KubeVirt's 1 s). */
const DEREGISTER_WAIT_MS = 1000;
/** INVALID_ARGUMENT, for an Allocate of devices this plugin never listed. */
const INVALID_ARGUMENT = 3;

/** What one plugin offers. */
export interface GenericDevicePluginOptions {
  /** The device's name: the resource is `devices.kubevirt.io/<deviceName>`, the socket `kubevirt-<deviceName>.sock`. */
  readonly deviceName: string;
  /** The device node, the same path on the host and in the container (`/dev/kvm`). */
  readonly devicePath: string;
  /** Slots advertised (KubeVirt's `--max-devices`, 1000). */
  readonly maxDevices: number;
  /** cgroup device permissions in the DeviceSpec ("rw"; KubeVirt uses "rwm" on cgroup v2). */
  readonly permissions: string;
  /** Open and close the node before serving, so the kernel autoloads its module (tun, vhost-net). */
  readonly preOpen: boolean;
  /** The kubelet's device plugins directory (its kubelet.sock is there, and this plugin's socket goes there). */
  readonly devicePluginsDir: string;
  readonly logger: Logger;
  /** Prefix of the device path when looking for the node (the host's root as this process sees it); default "". */
  readonly deviceRoot?: string;
  readonly pollMs?: number;
}

/** One device plugin (see the header). */
export class GenericDevicePlugin {
  readonly #o: GenericDevicePluginOptions;
  readonly #log: Logger;
  readonly #listeners = new Set<() => void>();
  #healthy = false;
  #initialized = false;

  constructor(options: GenericDevicePluginOptions) {
    this.#o = options;
    this.#log = options.logger.child({ devicePlugin: options.deviceName });
  }

  /** `devices.kubevirt.io/<deviceName>`. */
  get resourceName(): string {
    return `${DEVICE_NAMESPACE}/${this.#o.deviceName}`;
  }

  get deviceName(): string {
    return this.#o.deviceName;
  }

  /** This plugin's socket. */
  get socketPath(): string {
    return join(this.#o.devicePluginsDir, `kubevirt-${this.#o.deviceName}.sock`);
  }

  /** True while serving and registered with the kubelet. */
  get initialized(): boolean {
    return this.#initialized;
  }

  /**
   * Serves and registers, then runs until `signal` aborts or the kubelet restarts (resolves), or fails to start
   * (rejects: no kubelet socket, a refused registration). Either way it has stopped serving when it settles.
   */
  async run(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return;
    this.#preOpen();
    this.#healthy = this.#deviceExists();
    const streams = new StreamTracker();
    const server = await serveDevicePlugin(this.socketPath, this.#service(streams));
    try {
      const own = inode(this.socketPath);
      const kubeletSocket = join(this.#o.devicePluginsDir, KUBELET_SOCKET);
      await register(kubeletSocket, {
        version: API_VERSION,
        endpoint: basename(this.socketPath),
        resourceName: this.resourceName,
      });
      // After registering: a kubelet that replaced its socket since then also removed ours, which the watch sees.
      const kubelet = inode(kubeletSocket);
      this.#initialized = true;
      this.#log.info({ healthy: this.#healthy, socket: this.socketPath }, "device plugin started");
      if (!this.#healthy) this.#log.warn({ device: this.#o.devicePath }, "device is not present; advertised unhealthy");
      await this.#watch(signal, own, kubelet, kubeletSocket);
    } finally {
      this.#initialized = false;
      streams.finish();
      await streams.drained(DEREGISTER_WAIT_MS);
      await server.close(0);
    }
  }

  /** Polls the device node and the sockets until stopped or the kubelet restarted. */
  async #watch(signal: AbortSignal, own: number | undefined, kubelet: number | undefined, kubeletSocket: string) {
    const period = this.#o.pollMs ?? DEVICE_POLL_MS;
    while (await sleep(period, signal)) {
      const healthy = this.#deviceExists();
      if (healthy !== this.#healthy) {
        this.#healthy = healthy;
        this.#log.info({ device: this.#o.devicePath, healthy }, healthy ? "device appeared" : "device disappeared");
        for (const l of this.#listeners) l();
      }
      if (inode(this.socketPath) !== own) {
        this.#log.info("device plugin socket was removed, kubelet probably restarted; registering again");
        return;
      }
      const now = inode(kubeletSocket);
      if (now !== undefined && now !== kubelet) {
        this.#log.info("kubelet socket was replaced, kubelet restarted; registering again");
        return;
      }
    }
  }

  #service(streams: StreamTracker): DevicePluginService {
    return {
      getDevicePluginOptions: () => ({ preStartRequired: false }),
      listAndWatch: (send, signal) => streams.track(this.#listAndWatch(send, signal, streams.finished)),
      getPreferredAllocation: async () => ({ containerResponses: [] }),
      allocate: async (request) => this.#allocate(request.containerRequests.map((c) => c.devicesIds)),
      preStartContainer: async () => ({}),
    };
  }

  async #listAndWatch(
    send: (r: ListAndWatchResponse) => void,
    signal: AbortSignal,
    finished: AbortSignal,
  ): Promise<void> {
    const list = (): ListAndWatchResponse => ({ devices: this.#devices(this.#healthy ? HEALTHY : UNHEALTHY) });
    send(list());
    const changed = (): void => send(list());
    this.#listeners.add(changed);
    await Promise.race([aborted(signal), aborted(finished)]);
    this.#listeners.delete(changed);
    // No API call deregisters a plugin: an empty list makes the kubelet drop the devices at once.
    if (!signal.aborted) send({ devices: [] });
  }

  #allocate(containers: readonly (readonly string[])[]): AllocateResponse {
    this.#log.info({ containers }, "allocate");
    for (const ids of containers) {
      const unknown = ids.filter((id) => !this.#isOwnDevice(id));
      if (unknown.length > 0)
        throw new DevicePluginError(`${this.resourceName} has no devices ${unknown.join(", ")}`, {
          code: INVALID_ARGUMENT,
        });
    }
    const spec = { containerPath: this.#o.devicePath, hostPath: this.#o.devicePath, permissions: this.#o.permissions };
    return { containerResponses: containers.map(() => ({ devices: [spec] })) };
  }

  #isOwnDevice(id: string): boolean {
    if (!id.startsWith(this.#o.deviceName)) return false;
    const n = id.slice(this.#o.deviceName.length);
    return /^(0|[1-9]\d*)$/.test(n) && Number(n) < this.#o.maxDevices;
  }

  #devices(health: string): Device[] {
    return Array.from({ length: this.#o.maxDevices }, (_, i) => ({ ID: `${this.#o.deviceName}${i}`, health }));
  }

  #deviceExists(): boolean {
    return existsSync(join(this.#o.deviceRoot ?? "", this.#o.devicePath));
  }

  #preOpen(): void {
    if (!this.#o.preOpen) return;
    try {
      closeSync(openSync(this.#o.devicePath, "r"));
    } catch {
      // Only a trigger for the kernel's module autoload: a node that cannot be opened is reported by its health.
    }
  }
}

/** The ListAndWatch streams of one run: ends them together and waits for them. */
class StreamTracker {
  readonly #done = new AbortController();
  readonly #open = new Set<Promise<void>>();

  get finished(): AbortSignal {
    return this.#done.signal;
  }

  track(stream: Promise<void>): Promise<void> {
    this.#open.add(stream);
    void stream.finally(() => this.#open.delete(stream));
    return stream;
  }

  finish(): void {
    this.#done.abort();
  }

  /** Resolves once every stream ended, or after `ms`. */
  async drained(ms: number): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      Promise.allSettled([...this.#open]),
      new Promise((r) => {
        timer = setTimeout(r, ms);
      }),
    ]);
    clearTimeout(timer);
  }
}

function inode(path: string): number | undefined {
  try {
    return statSync(path).ino;
  } catch {
    return undefined;
  }
}

function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
}

/** Waits `ms`; false (at once) when `signal` aborts first. */
function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", stop);
      resolve(true);
    }, ms);
    const stop = (): void => {
      clearTimeout(timer);
      resolve(false);
    };
    signal.addEventListener("abort", stop, { once: true });
  });
}
