/**
 * Runs virt-handler's device plugins, as KubeVirt's DeviceController (device-manager/device_controller.go): the
 * permanent plugins `devices.kubevirt.io/kvm` (/dev/kvm), `tun` (/dev/net/tun) and `vhost-net` (/dev/vhost-net), each
 * started again after it returns (the kubelet restarted) or fails (no kubelet yet), waiting 1, 2, 5 then 10 s between
 * failed tries. `initialized()` is what the heartbeat's `kubevirt.io/schedulable` label reports.
 */
import { existsSync } from "node:fs";
import type { Logger } from "@kvt/observability";
import { GenericDevicePlugin } from "./generic-device-plugin.ts";

/** KubeVirt's `--max-devices` default: slots each plugin advertises. */
export const DEFAULT_MAX_DEVICES = 1000;
/** KubeVirt's waits between tries of a plugin that failed to start. */
export const DEFAULT_BACKOFF_MS: readonly number[] = [1000, 2000, 5000, 10_000];

/** The device nodes of the permanent plugins, by device name (KubeVirt's PermanentHostDevicePlugins). */
export const PERMANENT_DEVICES: Readonly<Record<string, string>> = {
  kvm: "/dev/kvm",
  tun: "/dev/net/tun",
  "vhost-net": "/dev/vhost-net",
};

/**
 * The cgroup permissions a DeviceSpec grants: "rw", and "rwm" on the unified cgroup v2 hierarchy, where runc's eBPF
 * device filter otherwise denies `access()` probes of the node (KubeVirt does the same).
 */
export function devicePermissions(cgroupRoot = "/sys/fs/cgroup"): string {
  return existsSync(`${cgroupRoot}/cgroup.controllers`) ? "rwm" : "rw";
}

/** The permanent plugins for a node (the hypervisor device, kvm, is not pre-opened: it needs no module load). */
export function permanentDevicePlugins(options: {
  devicePluginsDir: string;
  logger: Logger;
  maxDevices?: number;
  permissions?: string;
  devices?: Readonly<Record<string, string>>;
  pollMs?: number;
}): GenericDevicePlugin[] {
  const permissions = options.permissions ?? devicePermissions();
  return Object.entries(options.devices ?? PERMANENT_DEVICES).map(
    ([deviceName, devicePath]) =>
      new GenericDevicePlugin({
        deviceName,
        devicePath,
        maxDevices: options.maxDevices ?? DEFAULT_MAX_DEVICES,
        permissions,
        preOpen: deviceName !== "kvm",
        devicePluginsDir: options.devicePluginsDir,
        logger: options.logger,
        ...(options.pollMs ? { pollMs: options.pollMs } : {}),
      }),
  );
}

/** Keeps a set of device plugins running. */
export class DeviceController {
  readonly #plugins: readonly GenericDevicePlugin[];
  readonly #log: Logger;
  readonly #backoffMs: readonly number[];
  readonly #stop = new AbortController();
  #loops: Promise<void>[] = [];

  constructor(options: { plugins: readonly GenericDevicePlugin[]; logger: Logger; backoffMs?: readonly number[] }) {
    this.#plugins = options.plugins;
    this.#log = options.logger;
    this.#backoffMs = options.backoffMs ?? DEFAULT_BACKOFF_MS;
  }

  /** Starts every plugin (each keeps trying in the background). */
  start(): void {
    if (this.#loops.length > 0) return;
    this.#loops = this.#plugins.map((p) => this.#keepRunning(p));
  }

  /** True when every plugin is serving and registered with the kubelet. */
  initialized(): boolean {
    return this.#plugins.every((p) => p.initialized);
  }

  /** Stops every plugin (each sends the kubelet an empty device list first). */
  async stop(): Promise<void> {
    this.#stop.abort();
    await Promise.all(this.#loops);
  }

  async #keepRunning(plugin: GenericDevicePlugin): Promise<void> {
    const signal = this.#stop.signal;
    let retries = 0;
    this.#log.info({ devicePlugin: plugin.deviceName }, "starting a device plugin");
    while (!signal.aborted) {
      try {
        await plugin.run(signal);
        retries = 0;
      } catch (err) {
        // No kubelet yet, or it refused us: try again after the backoff (the heartbeat says unschedulable meanwhile).
        this.#log.warn({ err, devicePlugin: plugin.deviceName }, "device plugin did not start; retrying");
        retries = Math.min(retries + 1, this.#backoffMs.length - 1);
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.#backoffMs[retries]);
        signal.addEventListener(
          "abort",
          () => {
            clearTimeout(timer);
            resolve();
          },
          { once: true },
        );
      });
    }
  }
}
