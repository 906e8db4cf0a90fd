import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  API_VERSION,
  DevicePluginClient,
  DevicePluginError,
  type DevicePluginService,
  HEALTHY,
  type ListAndWatchResponse,
  type RegisterRequest,
  register,
  serveDevicePlugin,
  serveRegistration,
  UNHEALTHY,
  type UnixGrpcServer,
} from "./index.ts";

/** A plugin whose device list the test changes; it records the calls it gets. */
function testPlugin(): DevicePluginService & { setHealth(h: string): void; allocations: string[][] } {
  let health = HEALTHY;
  const listeners = new Set<() => void>();
  const allocations: string[][] = [];
  const list = (): ListAndWatchResponse => ({ devices: [0, 1].map((i) => ({ ID: `dev${i}`, health })) });
  return {
    allocations,
    setHealth(h) {
      health = h;
      for (const l of listeners) l();
    },
    getDevicePluginOptions: () => ({ preStartRequired: false, getPreferredAllocationAvailable: true }),
    async listAndWatch(send, signal) {
      send(list());
      const changed = (): void => send(list());
      listeners.add(changed);
      await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
      listeners.delete(changed);
    },
    async getPreferredAllocation(r) {
      return { containerResponses: r.containerRequests.map((c) => ({ deviceIDs: c.availableDeviceIDs.slice(-1) })) };
    },
    async allocate(r) {
      if (r.containerRequests.some((c) => c.devicesIds.includes("bad"))) throw new Error("device bad does not exist");
      allocations.push(...r.containerRequests.map((c) => c.devicesIds));
      return {
        containerResponses: r.containerRequests.map(() => ({
          envs: { TEST_DEVICE: "1" },
          mounts: [{ containerPath: "/run/x", hostPath: "/tmp/x", readOnly: true }],
          devices: [{ containerPath: "/dev/test", hostPath: "/dev/null", permissions: "rw" }],
        })),
      };
    },
    async preStartContainer() {
      return {};
    },
  };
}

describe("device plugin API over unix sockets", () => {
  let dir: string;
  const servers: UnixGrpcServer[] = [];
  const clients: DevicePluginClient[] = [];
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "kvt-dp-"));
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) c.close();
    await Promise.all(servers.splice(0).map((s) => s.close(0)));
    rmSync(dir, { recursive: true, force: true });
  });
  const serve = async (name: string, plugin: DevicePluginService): Promise<UnixGrpcServer> => {
    const s = await serveDevicePlugin(join(dir, name), plugin);
    servers.push(s);
    return s;
  };
  const connect = async (name: string): Promise<DevicePluginClient> => {
    const c = await DevicePluginClient.connect(join(dir, name), 2000);
    clients.push(c);
    return c;
  };

  it("registers with the kubelet's Registration service and is refused with the kubelet's message", async () => {
    const got: RegisterRequest[] = [];
    servers.push(
      await serveRegistration(join(dir, "kubelet.sock"), async (r) => {
        if (r.version !== API_VERSION) throw new Error(`requested API version "${r.version}" is not supported`);
        got.push(r);
      }),
    );
    await register(join(dir, "kubelet.sock"), {
      version: API_VERSION,
      endpoint: "kubevirt-kvm.sock",
      resourceName: "devices.kubevirt.io/kvm",
    });
    expect(got).toEqual([
      {
        version: "v1beta1",
        endpoint: "kubevirt-kvm.sock",
        resourceName: "devices.kubevirt.io/kvm",
        options: null,
      },
    ]);
    const refused = register(join(dir, "kubelet.sock"), { version: "v1alpha", endpoint: "x", resourceName: "a/b" });
    await expect(refused).rejects.toThrow(/Register on .*kubelet.sock: requested API version "v1alpha"/);
    await expect(refused).rejects.toBeInstanceOf(DevicePluginError);
  });

  it("streams device lists, answers options, preferred allocations and Allocate", async () => {
    const plugin = testPlugin();
    await serve("p.sock", plugin);
    const client = await connect("p.sock");
    expect(await client.getDevicePluginOptions()).toEqual({
      preStartRequired: false,
      getPreferredAllocationAvailable: true,
    });
    const lists: ListAndWatchResponse[] = [];
    const watch = client.listAndWatch((r) => lists.push(r));
    await waitUntil(() => lists.length === 1);
    expect(lists[0].devices.map((d) => [d.ID, d.health])).toEqual([
      ["dev0", HEALTHY],
      ["dev1", HEALTHY],
    ]);
    plugin.setHealth(UNHEALTHY);
    await waitUntil(() => lists.length === 2);
    expect(lists[1].devices.every((d) => d.health === UNHEALTHY)).toBe(true);
    const preferred = await client.getPreferredAllocation({
      containerRequests: [{ availableDeviceIDs: ["dev0", "dev1"], mustIncludeDeviceIDs: [], allocationSize: 1 }],
    });
    expect(preferred.containerResponses).toEqual([{ deviceIDs: ["dev1"] }]);
    const allocated = await client.allocate({ containerRequests: [{ devicesIds: ["dev0"] }] });
    expect(plugin.allocations).toEqual([["dev0"]]);
    expect(allocated.containerResponses).toEqual([
      {
        envs: { TEST_DEVICE: "1" },
        mounts: [{ containerPath: "/run/x", hostPath: "/tmp/x", readOnly: true }],
        devices: [{ containerPath: "/dev/test", hostPath: "/dev/null", permissions: "rw" }],
        annotations: {},
        cdiDevices: [],
      },
    ]);
    expect(await client.preStartContainer({ devicesIds: ["dev0"] })).toEqual({});
    watch.cancel();
    expect(await watch.ended).toBeUndefined();
  });

  it("passes a plugin's error to the kubelet as UNKNOWN with its message", async () => {
    await serve("p.sock", testPlugin());
    const client = await connect("p.sock");
    const failed = client.allocate({ containerRequests: [{ devicesIds: ["bad"] }] });
    await expect(failed).rejects.toThrow(/^Allocate on .*p.sock: device bad does not exist$/);
    await expect(failed).rejects.toMatchObject({ code: 2, codeName: "UNKNOWN" });
  });

  it("ends the kubelet's stream with an error when the plugin's server goes away", async () => {
    const server = await serve("p.sock", testPlugin());
    const client = await connect("p.sock");
    const watch = client.listAndWatch(() => undefined);
    await new Promise((r) => setTimeout(r, 50));
    await server.close(0);
    const ended = await watch.ended;
    expect(ended).toBeInstanceOf(DevicePluginError);
    expect(ended?.message).toMatch(/ListAndWatch on .*p.sock/);
  });

  it("fails to connect within the deadline when nothing listens", async () => {
    const started = Date.now();
    await expect(DevicePluginClient.connect(join(dir, "nobody.sock"), 300)).rejects.toThrow(
      /cannot connect to .*nobody.sock within 300 ms/,
    );
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it("creates its socket 0600, replaces a stale socket and refuses to replace another file", async () => {
    const first = await serve("p.sock", testPlugin());
    expect(statSync(join(dir, "p.sock")).mode & 0o777).toBe(0o600);
    await first.close(0);
    await serve("p.sock", testPlugin()); // whether or not the first left its socket behind
    const client = await connect("p.sock");
    expect((await client.getDevicePluginOptions()).getPreferredAllocationAvailable).toBe(true);
    writeFileSync(join(dir, "file"), "not a socket");
    await expect(serveDevicePlugin(join(dir, "file"), testPlugin())).rejects.toThrow(/exists and is not a socket/);
  });
});

async function waitUntil(check: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 10));
  }
}
