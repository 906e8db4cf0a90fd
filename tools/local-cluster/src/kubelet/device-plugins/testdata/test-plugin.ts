/**
 * A device plugin for the device manager's tests, served over real gRPC by @kvt/device-plugin: `count` devices
 * (`<prefix>0` ...) whose health the test sets; Allocate answers a DeviceSpec for `devicePath`, an env naming the
 * devices and a mount; it records the calls it gets.
 */
import { join } from "node:path";
import {
  API_VERSION,
  type Device,
  type DevicePluginOptions,
  HEALTHY,
  type ListAndWatchResponse,
  register,
  serveDevicePlugin,
  type UnixGrpcServer,
} from "@kvt/device-plugin";

/** A running test plugin. */
export interface TestPlugin {
  readonly allocations: string[][];
  readonly preStarts: string[][];
  /** Sets every device's health (the plugin sends the list again). */
  setHealth(health: string): void;
  /** Registers (again) with the kubelet in `dir`. */
  register(): Promise<void>;
  stop(): Promise<void>;
}

/** Serves a plugin of `resource` in `dir` and registers it. */
export async function startTestPlugin(
  dir: string,
  resource: string,
  options: {
    count: number;
    devicePath: string;
    endpoint?: string;
    pluginOptions?: DevicePluginOptions;
    prefer?: (available: string[]) => string[];
  },
): Promise<TestPlugin> {
  const prefix = resource.split("/")[1] ?? "dev";
  const endpoint = options.endpoint ?? `test-${prefix}.sock`;
  let health = HEALTHY;
  const listeners = new Set<() => void>();
  const allocations: string[][] = [];
  const preStarts: string[][] = [];
  const list = (): ListAndWatchResponse => ({
    devices: Array.from({ length: options.count }, (_, i): Device => ({ ID: `${prefix}${i}`, health })),
  });
  const server: UnixGrpcServer = await serveDevicePlugin(join(dir, endpoint), {
    getDevicePluginOptions: () => options.pluginOptions ?? {},
    async listAndWatch(send, signal) {
      send(list());
      const changed = (): void => send(list());
      listeners.add(changed);
      await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
      listeners.delete(changed);
    },
    async getPreferredAllocation(r) {
      return {
        containerResponses: r.containerRequests.map((c) => ({
          deviceIDs: options.prefer ? options.prefer(c.availableDeviceIDs) : [],
        })),
      };
    },
    async allocate(r) {
      allocations.push(...r.containerRequests.map((c) => c.devicesIds));
      return {
        containerResponses: r.containerRequests.map((c) => ({
          envs: { TEST_DEVICES: c.devicesIds.join(",") },
          mounts: [{ containerPath: "/var/run/test-device", hostPath: dir, readOnly: true }],
          devices: [{ containerPath: options.devicePath, hostPath: options.devicePath, permissions: "rw" }],
        })),
      };
    },
    async preStartContainer(r) {
      preStarts.push(r.devicesIds);
      return {};
    },
  });
  const plugin: TestPlugin = {
    allocations,
    preStarts,
    setHealth(h) {
      health = h;
      for (const l of listeners) l();
    },
    register: () =>
      register(join(dir, "kubelet.sock"), {
        version: API_VERSION,
        endpoint,
        resourceName: resource,
        options: options.pluginOptions ?? {},
      }),
    stop: () => server.close(0),
  };
  await plugin.register();
  return plugin;
}
