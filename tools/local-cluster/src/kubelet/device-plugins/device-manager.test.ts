import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { API_VERSION, register, UNHEALTHY } from "@kvt/device-plugin";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  DeviceManager,
  type DeviceManager as DeviceManagerType,
  type DevicePod,
  isExtendedResourceName,
} from "./device-manager.ts";
import { startTestPlugin, type TestPlugin } from "./testdata/test-plugin.ts";

const log = pino({ level: "silent" });
const KVM = "devices.kubevirt.io/kvm";

async function until<T>(what: string, fn: () => T | undefined | false, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = fn();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const pod = (uid: string, kvm: number | string, extra: Record<string, string> = {}): DevicePod => ({
  metadata: { uid, namespace: "default", name: `pod-${uid}` },
  spec: { containers: [{ name: "compute", resources: { limits: { cpu: "1", [KVM]: String(kvm), ...extra } } }] },
});

describe("the process-kubelet's device manager, over gRPC", () => {
  let dir: string;
  let manager: DeviceManagerType;
  let changes = 0;
  const plugins: TestPlugin[] = [];
  const startManager = async (stopGraceMs?: number): Promise<DeviceManagerType> => {
    manager = new DeviceManager({
      dir,
      log,
      onChange: () => changes++,
      ...(stopGraceMs !== undefined ? { stopGraceMs } : {}),
    });
    await manager.start();
    return manager;
  };
  const plugin = async (
    count: number,
    options: Partial<Parameters<typeof startTestPlugin>[2]> = {},
    resource = KVM,
  ): Promise<TestPlugin> => {
    const p = await startTestPlugin(dir, resource, { count, devicePath: "/dev/null", ...options });
    plugins.push(p);
    return p;
  };
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-dm-"));
    changes = 0;
  });
  afterEach(async () => {
    await Promise.all(plugins.splice(0).map((p) => p.stop()));
    await manager?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("serves kubelet.sock 0600 in a 0700 dir, clearing stale sockets but keeping the checkpoint", async () => {
    writeFileSync(join(dir, "stale.sock"), "");
    writeFileSync(join(dir, "kubelet_internal_checkpoint"), '{"Data":{"PodDeviceEntries":[],"RegisteredDevices":{}}}');
    await startManager();
    expect(existsSync(join(dir, "stale.sock"))).toBe(false);
    expect(existsSync(join(dir, "kubelet_internal_checkpoint"))).toBe(true);
    expect(statSync(join(dir, "kubelet.sock")).mode & 0o777).toBe(0o600);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
  });

  it("refuses a registration with the kubelet's messages", async () => {
    await startManager();
    const sock = join(dir, "kubelet.sock");
    await expect(register(sock, { version: "v1alpha", endpoint: "a.sock", resourceName: KVM })).rejects.toThrow(
      'requested API version "v1alpha" is not supported by kubelet. Supported versions are ["v1beta1"]',
    );
    await expect(register(sock, { version: API_VERSION, endpoint: "a.sock", resourceName: "cpu" })).rejects.toThrow(
      'the ResourceName "cpu" is invalid',
    );
    await expect(
      register(sock, { version: API_VERSION, endpoint: "../../etc/x.sock", resourceName: KVM }),
    ).rejects.toThrow(/the endpoint "..\/..\/etc\/x.sock" is not a file name in/);
  });

  it("reports a plugin's devices: capacity all of them, allocatable the healthy ones", async () => {
    await startManager();
    const p = await plugin(3);
    await until("the devices", () => manager.capacity().capacity[KVM] === "3");
    expect(manager.capacity()).toEqual({ capacity: { [KVM]: "3" }, allocatable: { [KVM]: "3" } });
    expect(changes).toBeGreaterThan(0);
    p.setHealth(UNHEALTHY);
    await until("unhealthy", () => manager.capacity().allocatable[KVM] === "0");
    expect(manager.capacity().capacity[KVM]).toBe("3");
  });

  it("allocates free devices through the plugin, hands its answer to the container, and frees them", async () => {
    await startManager();
    const p = await plugin(2);
    await until("the devices", () => manager.capacity().allocatable[KVM] === "2");
    expect(await manager.admit(pod("a", 1))).toBeUndefined();
    expect(p.allocations).toEqual([["kvm0"]]);
    expect(manager.containerDevices("a", "compute")).toEqual([
      {
        envs: { TEST_DEVICES: "kvm0" },
        mounts: [{ containerPath: "/var/run/test-device", hostPath: dir, readOnly: true }],
        devices: [{ containerPath: "/dev/null", hostPath: "/dev/null", permissions: "rw" }],
        annotations: {},
        cdiDevices: [],
      },
    ]);
    expect(await manager.admit(pod("b", 1))).toBeUndefined();
    expect(p.allocations).toEqual([["kvm0"], ["kvm1"]]);
    // Both taken: the kubelet's UnexpectedAdmissionError, with its message.
    expect(await manager.admit(pod("c", 1))).toEqual({
      reason: "UnexpectedAdmissionError",
      message:
        "Allocate failed due to requested number of devices unavailable for devices.kubevirt.io/kvm. Requested: 1, Available: 0, which is unexpected",
    });
    manager.release("a");
    expect(await manager.admit(pod("c", 1))).toBeUndefined();
    expect(p.allocations.at(-1)).toEqual(["kvm0"]);
    // Admitting a pod that holds its devices already allocates nothing again.
    expect(await manager.admit(pod("c", 1))).toBeUndefined();
    expect(p.allocations).toHaveLength(3);
  });

  it("refuses more than the healthy devices, and unhealthy devices, with the kubelet's messages", async () => {
    await startManager();
    const p = await plugin(2);
    await until("the devices", () => manager.capacity().allocatable[KVM] === "2");
    expect((await manager.admit(pod("big", 3)))?.message).toBe(
      "Allocate failed due to requested number of devices unavailable for devices.kubevirt.io/kvm. Requested: 3, Available: 2, which is unexpected",
    );
    p.setHealth(UNHEALTHY);
    await until("unhealthy", () => manager.capacity().allocatable[KVM] === "0");
    expect((await manager.admit(pod("x", 1)))?.message).toBe(
      "Allocate failed due to no healthy devices present; cannot allocate unhealthy devices devices.kubevirt.io/kvm, which is unexpected",
    );
    expect(p.allocations).toEqual([]);
    // A resource no plugin offers is not the device manager's to refuse (the scheduler keeps such pods away).
    expect(await manager.admit(pod("y", 0, { "example.com/other": "1" }))).toBeUndefined();
  });

  it("takes the plugin's preferred devices and calls PreStartContainer when the plugin asks for it", async () => {
    await startManager();
    const p = await plugin(4, {
      pluginOptions: { getPreferredAllocationAvailable: true, preStartRequired: true },
      prefer: (available) => available.slice(-2).reverse(),
    });
    await until("the devices", () => manager.capacity().allocatable[KVM] === "4");
    expect(await manager.admit(pod("a", 2))).toBeUndefined();
    expect(p.allocations).toEqual([["kvm3", "kvm2"]]);
    expect(p.preStarts).toEqual([["kvm3", "kvm2"]]);
  });

  it("turns a gone plugin's devices unhealthy, then removes the resource after the grace period", async () => {
    await startManager(300);
    const p = await plugin(2);
    await until("the devices", () => manager.capacity().allocatable[KVM] === "2");
    await p.stop();
    await until("allocatable 0", () => manager.capacity().allocatable[KVM] === "0");
    expect(manager.capacity().capacity[KVM]).toBe("2");
    await until("capacity 0", () => manager.capacity().capacity[KVM] === "0", 3000);
    expect(manager.capacity()).toEqual({ capacity: { [KVM]: "0" }, allocatable: { [KVM]: "0" } });
    // The plugin comes back: its devices are offered again.
    const again = await plugin(2, { endpoint: "again.sock" });
    await until("back", () => manager.capacity().allocatable[KVM] === "2");
    expect(again.allocations).toEqual([]);
  });

  it("keeps allocations and registered resources across a restart (the checkpoint)", async () => {
    await startManager();
    const p = await plugin(2);
    await until("the devices", () => manager.capacity().allocatable[KVM] === "2");
    expect(await manager.admit(pod("a", 1))).toBeUndefined();
    await manager.stop();
    await p.stop();
    plugins.splice(0);
    await startManager();
    // Known from the checkpoint, not usable until the plugin registers again; the allocation is still held.
    expect(manager.capacity()).toEqual({ capacity: { [KVM]: "2" }, allocatable: { [KVM]: "0" } });
    expect(manager.containerDevices("a", "compute")[0]?.envs).toEqual({ TEST_DEVICES: "kvm0" });
    await plugin(2, { endpoint: "back.sock" });
    await until("re-registered", () => manager.capacity().allocatable[KVM] === "2");
    expect((await manager.admit(pod("b", 2)))?.message).toMatch(/Requested: 2, Available: 1/);
    manager.retain(new Set(["b"])); // pod a is gone
    expect(manager.containerDevices("a", "compute")).toEqual([]);
    expect(await manager.admit(pod("b", 2))).toBeUndefined();
  });

  it("knows kube's extended resource names", () => {
    expect(isExtendedResourceName("devices.kubevirt.io/kvm")).toBe(true);
    expect(isExtendedResourceName("nvidia.com/gpu")).toBe(true);
    expect(isExtendedResourceName("cpu")).toBe(false);
    expect(isExtendedResourceName("kubernetes.io/foo")).toBe(false);
    expect(isExtendedResourceName("requests.example.com/foo")).toBe(false);
    expect(isExtendedResourceName("Example.com/foo")).toBe(false);
  });
});
