import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LauncherClient, type LauncherEvent, launcherSocketPath } from "@kvt/launcher-rpc";
import { createLogger } from "@kvt/observability";
import { FakeVmm, hasKvm, testGuestPath } from "@kvt/vmm";
import { afterEach, describe, expect, it } from "vitest";
import { type LauncherApp, startLauncherApp } from "../../launcher-app.ts";
import { machineFactory } from "../create-machine.ts";
import type { MachineSpec } from "../machine.ts";
import { nativeBootOptions } from "./boot-options.ts";
import { NativeMachine } from "./native-machine.ts";

const logger = createLogger({ component: "test", level: "silent" });
const pvmHost = { kvmDevice: true, hardwareVirt: false, pvm: true };

function spec(cmdline: string, extra: Partial<MachineSpec> = {}): MachineSpec {
  return {
    vmiKey: "default/guest",
    memoryBytes: 64 * 2 ** 20,
    vcpus: 1,
    boot: { kernelPath: testGuestPath(), cmdline, pvmSafe: true },
    workDir: tmpdir(),
    ...extra,
  };
}

describe("NativeMachine (fake VMM)", () => {
  it("refuses a kernel it cannot read before allocating anything", () => {
    const s = spec("", { boot: { kernelPath: "/nonexistent/k", cmdline: "", pvmSafe: false } });
    expect(() => new NativeMachine(s, new FakeVmm(), logger)).toThrow(/cannot read the kernel/);
  });

  it("boots a bzImage + initramfs as Linux with its disks (cloud-init's ISO among them), and an ELF as is", () => {
    const dir = mkdtempSync(join(tmpdir(), "kvt-boot-"));
    try {
      writeFileSync(join(dir, "vmlinuz"), Buffer.from("MZ not an ELF"));
      const linux = spec("console=ttyS0 quiet", {
        boot: { kernelPath: join(dir, "vmlinuz"), initrdPath: join(dir, "initrd"), cmdline: "quiet", pvmSafe: false },
        disks: [
          { name: "cloudinitdisk", path: "/w/ci.iso", readOnly: true, kind: "cloudInitNoCloud", shared: true },
          { name: "data", path: "/w/d.img", readOnly: false, kind: "emptyDisk", shared: false, serial: "X".repeat(30) },
        ],
        firmwareUuid: "5d307ca9-b3ef-428c-8861-06e72d69f223",
      });
      const o = nativeBootOptions(linux);
      expect(o.kernel).toBeUndefined();
      expect(o.boot).toMatchObject({
        kind: "linux",
        initrdPath: join(dir, "initrd"),
        cmdline: "quiet",
        uuid: "5d307ca9-b3ef-428c-8861-06e72d69f223",
      });
      // The cloud-init ISO is the same on both ends of a migration; the writable local disk is copied with the memory.
      expect(o.boot?.disks).toEqual([
        { path: "/w/ci.iso", readOnly: true, serial: "", migrate: "shared" },
        { path: "/w/d.img", readOnly: false, serial: "X".repeat(20), migrate: "copy" },
      ]);
      expect(nativeBootOptions(spec("ws=4")).kernel).toMatchObject({ path: testGuestPath(), cmdline: "ws=4" });
      // The ELF test guest has no PCI bus: its cloud-init disk is left out, a data disk refused.
      const elf = { ...spec("ws=4"), disks: linux.disks };
      expect(() => nativeBootOptions(elf)).toThrow(/takes no disks \(data\)/);
      expect(nativeBootOptions({ ...elf, disks: linux.disks?.slice(0, 1) }).kernel).toBeDefined();
      // The image's uncompressed kernel (ELF vmlinux), when it has one, is what the native VMM boots.
      const direct = nativeBootOptions({
        ...linux,
        boot: { ...linux.boot, uncompressedKernelPath: join(dir, "vmlinux") },
      });
      expect(direct.boot).toMatchObject({ kind: "linux", kernelPath: join(dir, "vmlinux") });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a Linux guest's reset boots it again, Ctrl-Alt-Del shuts it down, power-off stops it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kvt-boot-"));
    writeFileSync(join(dir, "vmlinuz"), Buffer.from("bzImage"));
    const vmm = new FakeVmm();
    const m = new NativeMachine(
      spec("", { boot: { kernelPath: join(dir, "vmlinuz"), cmdline: "", pvmSafe: false } }),
      vmm,
      logger,
    );
    try {
      await m.start();
      const first = vmm.vms[0];
      first?.guestExit(0, "reset");
      expect(m.state).toBe("running");
      expect(vmm.vms).toHaveLength(2);
      await m.shutdown(5_000);
      expect(m.state).toBe("stopped");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("the factory picks the native VMM for a PVM-safe guest and QEMU otherwise, and says why", async () => {
    const factory = machineFactory({ logger, useEmulation: "whenNeeded", host: pvmHost, vmm: new FakeVmm() });
    const native = await factory(spec(""));
    expect(native).toMatchObject({ emulated: false, machine: { backend: "native" } });
    const demo = spec("", { boot: { kernelPath: "/vmlinuz", initrdPath: "/initrd", cmdline: "", pvmSafe: false } });
    const emulated = await factory(demo);
    expect(emulated.emulated).toBe(true);
    expect(emulated.machine.backend).toBe("qemu");
    expect(emulated.reason).toContain("PVM");
    const never = machineFactory({ logger, useEmulation: "never", host: pvmHost });
    await expect(never(demo)).rejects.toThrow(/NoVirtualizationAvailable/);
  });
});

describe.skipIf(!hasKvm())("virt-launcher with the native VMM on /dev/kvm", () => {
  let dir: string | undefined;
  let app: LauncherApp | undefined;
  afterEach(async () => {
    await app?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function launch(
    cmdline: string,
    vmiSpec: Record<string, unknown> = {},
  ): Promise<{ client: LauncherClient; events: LauncherEvent[] }> {
    dir = mkdtempSync(join(tmpdir(), "kvt-native-"));
    const socketPath = launcherSocketPath(dir, "pod-n");
    app = await startLauncherApp({
      identity: { namespace: "default", name: "guest", uid: "vmi-n" },
      vmi: { metadata: { name: "guest", namespace: "default", uid: "vmi-n" }, spec: vmiSpec } as never,
      socketPath,
      toSpec: () => spec(cmdline),
      createMachine: machineFactory({ logger, useEmulation: "never", host: pvmHost }),
      logger,
    });
    const client = new LauncherClient(socketPath, { timeoutMs: 10_000 });
    const events: LauncherEvent[] = [];
    void client.watchEvents((e) => events.push(e)).catch(() => {});
    return { client, events };
  }

  it("boots the test guest through sync, streams its console, and exits with success when the guest does", async () => {
    const { client } = await launch("ws=4 every=256 lines=3 seed=1");
    const stream = await client.openConsole();
    let text = "";
    stream.on("data", (c: Buffer) => {
      text += c.toString();
    });
    const info = await client.sync();
    expect(info).toMatchObject({ backend: "native", emulated: false });
    await expect(app!.finished).resolves.toMatchObject({ state: "Shutdown" });
    await expect.poll(() => text).toMatch(/kvt-guest done n=3/);
    expect(text).toContain("kvt-guest start ws=4");
    stream.destroy();
  });

  it("startStrategy Paused: the guest is set up but runs no instruction until the first unpause", async () => {
    const { client } = await launch("ws=4 every=256 lines=3 seed=1", { startStrategy: "Paused" });
    const stream = await client.openConsole();
    let text = "";
    stream.on("data", (c: Buffer) => {
      text += c.toString();
    });
    expect((await client.sync()).state).toBe("Paused");
    await new Promise((r) => setTimeout(r, 300));
    expect(text).toBe(""); // not even the guest's first line
    expect((await client.info()).state).toBe("Paused");
    await client.unpause();
    await expect(app!.finished).resolves.toMatchObject({ state: "Shutdown" });
    await expect.poll(() => text).toMatch(/kvt-guest done n=3/);
    expect(text).toContain("kvt-guest start ws=4");
    stream.destroy();
  });

  it("pauses and resumes a running guest, and kill ends it as a failure", async () => {
    const { client } = await launch("ws=4 every=256 lines=100000 rate=10");
    await client.sync();
    await client.pause();
    expect((await client.info()).state).toBe("Paused");
    await client.unpause();
    expect((await client.info()).state).toBe("Running");
    expect((await client.info()).notMigratableReason).toBeUndefined(); // LiveMigratable=True
    await client.kill();
    await expect(app!.finished).resolves.toEqual({ state: "Crashed", reason: "Killed" });
  });
});
