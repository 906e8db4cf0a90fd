import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  DevicePluginClient,
  HEALTHY,
  type ListAndWatchResponse,
  type RegisterRequest,
  serveRegistration,
  UNHEALTHY,
  type UnixGrpcServer,
} from "@kvt/device-plugin";
import { createLogger } from "@kvt/observability";
import { eventually } from "@kvt/testing";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { DeviceController, devicePermissions, permanentDevicePlugins } from "./device-controller.ts";
import { GenericDevicePlugin } from "./generic-device-plugin.ts";

const logger = createLogger({ component: "test", level: "silent" });
const fast = { timeoutMs: 10_000, intervalMs: 20 };

/** A kubelet's side of the API, real gRPC: records registrations, dials each plugin and follows its devices. */
class TestKubelet {
  readonly registrations: RegisterRequest[] = [];
  readonly lists = new Map<string, ListAndWatchResponse[]>();
  readonly clients: DevicePluginClient[] = [];
  readonly dir: string;
  #server: UnixGrpcServer | undefined;
  constructor(dir: string) {
    this.dir = dir;
  }

  async start(): Promise<void> {
    // As the kubelet at start: every socket in the directory goes (plugins notice and register again).
    for (const f of readdirSync(this.dir)) if (f.endsWith(".sock")) rmSync(join(this.dir, f));
    this.#server = await serveRegistration(join(this.dir, "kubelet.sock"), async (r) => {
      this.registrations.push(r);
      void this.#dial(r); // as the kubelet: answer at once, dial the plugin in the background
    });
  }

  async #dial(r: RegisterRequest): Promise<void> {
    const client = await DevicePluginClient.connect(join(this.dir, r.endpoint), 2000).catch(() => undefined);
    if (!client) return;
    this.clients.push(client);
    const lists: ListAndWatchResponse[] = [];
    this.lists.set(r.resourceName, lists);
    client.listAndWatch((l) => lists.push(l));
  }

  latest(resource: string): ListAndWatchResponse | undefined {
    return this.lists.get(resource)?.at(-1);
  }

  async stop(): Promise<void> {
    for (const c of this.clients.splice(0)) c.close();
    await this.#server?.close(0);
  }
}

describe("virt-handler's device plugins against a kubelet over gRPC", () => {
  let dir: string;
  let devDir: string;
  let kubelet: TestKubelet;
  let controller: DeviceController | undefined;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "kvt-dp-"));
    devDir = join(dir, "dev");
    mkdirSync(join(dir, "plugins"));
    mkdirSync(devDir);
    kubelet = new TestKubelet(join(dir, "plugins"));
  });
  afterEach(async () => {
    await controller?.stop();
    controller = undefined;
    await kubelet.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const start = (plugins: GenericDevicePlugin[], backoffMs = [50, 100]): DeviceController => {
    controller = new DeviceController({ plugins, logger, backoffMs });
    controller.start();
    return controller;
  };
  const kvmPlugin = (maxDevices = 3): GenericDevicePlugin =>
    new GenericDevicePlugin({
      deviceName: "kvm",
      devicePath: join(devDir, "kvm"),
      maxDevices,
      permissions: "rw",
      preOpen: false,
      devicePluginsDir: join(dir, "plugins"),
      logger,
      pollMs: 20,
    });

  it("registers devices.kubevirt.io/kvm and follows the device node's presence with the devices' health", async () => {
    writeFileSync(join(devDir, "kvm"), "");
    await kubelet.start();
    const c = start([kvmPlugin()]);
    await eventually(() => {
      expect(kubelet.latest("devices.kubevirt.io/kvm")?.devices).toHaveLength(3);
      return true;
    }, fast);
    expect(kubelet.registrations).toEqual([
      { version: "v1beta1", endpoint: "kubevirt-kvm.sock", resourceName: "devices.kubevirt.io/kvm", options: null },
    ]);
    expect(kubelet.latest("devices.kubevirt.io/kvm")?.devices.map((d) => [d.ID, d.health])).toEqual([
      ["kvm0", HEALTHY],
      ["kvm1", HEALTHY],
      ["kvm2", HEALTHY],
    ]);
    expect(c.initialized()).toBe(true);
    rmSync(join(devDir, "kvm"));
    await eventually(
      () => kubelet.latest("devices.kubevirt.io/kvm")?.devices.every((d) => d.health === UNHEALTHY),
      fast,
    );
    writeFileSync(join(devDir, "kvm"), "");
    await eventually(() => kubelet.latest("devices.kubevirt.io/kvm")?.devices.every((d) => d.health === HEALTHY), fast);
  });

  it("allocates the device node itself to each container, and refuses devices it never listed", async () => {
    writeFileSync(join(devDir, "kvm"), "");
    await kubelet.start();
    start([kvmPlugin()]);
    await eventually(() => {
      expect(kubelet.clients).toHaveLength(1);
      return true;
    }, fast);
    const response = await kubelet.clients[0].allocate({
      containerRequests: [{ devicesIds: ["kvm1"] }, { devicesIds: ["kvm0", "kvm2"] }],
    });
    const spec = { containerPath: join(devDir, "kvm"), hostPath: join(devDir, "kvm"), permissions: "rw" };
    expect(response.containerResponses.map((r) => r.devices)).toEqual([[spec], [spec]]);
    expect(response.containerResponses[0].envs).toEqual({});
    const refused = kubelet.clients[0].allocate({ containerRequests: [{ devicesIds: ["kvm3", "tun0"] }] });
    await expect(refused).rejects.toThrow(/devices.kubevirt.io\/kvm has no devices kvm3, tun0/);
    await expect(refused).rejects.toMatchObject({ codeName: "INVALID_ARGUMENT" });
  });

  it("advertises KubeVirt's 1000 slots for kvm, tun and vhost-net, unhealthy where the node is missing", async () => {
    writeFileSync(join(devDir, "kvm"), "");
    writeFileSync(join(devDir, "tun"), "");
    await kubelet.start();
    const plugins = permanentDevicePlugins({
      devicePluginsDir: join(dir, "plugins"),
      logger,
      devices: { kvm: join(devDir, "kvm"), tun: join(devDir, "tun"), "vhost-net": join(devDir, "vhost-net") },
      pollMs: 20,
    });
    const c = start(plugins);
    await eventually(() => {
      expect(c.initialized()).toBe(true);
      return true;
    }, fast);
    const health = (r: string): string[] => [...new Set(kubelet.latest(r)?.devices.map((d) => d.health))];
    await eventually(() => {
      for (const r of ["kvm", "tun", "vhost-net"])
        expect(kubelet.latest(`devices.kubevirt.io/${r}`)?.devices).toHaveLength(1000);
      return true;
    }, fast);
    expect(health("devices.kubevirt.io/kvm")).toEqual([HEALTHY]);
    expect(health("devices.kubevirt.io/tun")).toEqual([HEALTHY]);
    expect(health("devices.kubevirt.io/vhost-net")).toEqual([UNHEALTHY]);
    expect(kubelet.latest("devices.kubevirt.io/tun")?.devices[999].ID).toBe("tun999");
  });

  it("waits for a kubelet, registers again when the kubelet restarts, and deregisters with an empty list", async () => {
    writeFileSync(join(devDir, "kvm"), "");
    const c = start([kvmPlugin()]);
    await new Promise((r) => setTimeout(r, 200));
    expect(c.initialized()).toBe(false); // no kubelet.sock yet: the heartbeat says unschedulable
    await kubelet.start();
    await eventually(() => {
      expect(c.initialized()).toBe(true);
      return true;
    }, fast);
    await eventually(() => {
      expect(kubelet.latest("devices.kubevirt.io/kvm")?.devices).toHaveLength(3);
      return true;
    }, fast);
    await kubelet.stop();
    const restarted = new TestKubelet(join(dir, "plugins"));
    kubelet = restarted;
    await restarted.start(); // removes the plugin's socket and makes a new kubelet.sock
    await eventually(() => {
      expect(restarted.latest("devices.kubevirt.io/kvm")?.devices).toHaveLength(3);
      return true;
    }, fast);
    expect(restarted.registrations[0]).toMatchObject({ resourceName: "devices.kubevirt.io/kvm" });
    await c.stop();
    await eventually(() => {
      expect(restarted.latest("devices.kubevirt.io/kvm")?.devices).toEqual([]);
      return true;
    }, fast);
    expect(c.initialized()).toBe(false);
  });

  it("grants rwm on cgroup v2, rw on v1 (KubeVirt's permissions)", () => {
    writeFileSync(join(dir, "cgroup.controllers"), "cpu memory");
    expect(devicePermissions(dir)).toBe("rwm");
    expect(devicePermissions(devDir)).toBe("rw");
  });
});
