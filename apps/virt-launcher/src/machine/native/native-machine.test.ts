import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LauncherClient, type LauncherEvent, launcherSocketPath } from "@kvt/launcher-rpc";
import { createLogger } from "@kvt/observability";
import { FakeVmm, hasKvm, testGuestPath } from "@kvt/vmm";
import { afterEach, describe, expect, it } from "vitest";
import { type LauncherApp, startLauncherApp } from "../../launcher-app.ts";
import { machineFactory } from "../create-machine.ts";
import type { MachineSpec } from "../machine.ts";
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
  it("refuses a kernel with an initramfs before allocating anything", () => {
    const s = spec("", { boot: { kernelPath: "/k", initrdPath: "/i", cmdline: "", pvmSafe: false } });
    expect(() => new NativeMachine(s, new FakeVmm(), logger)).toThrow(/without an initramfs/);
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

  it("is not live-migratable yet and says so", async () => {
    const m = new NativeMachine(spec(""), new FakeVmm(), logger);
    expect(m.notMigratableReason).toMatch(/not available yet/);
    await expect(m.prepareIncoming()).rejects.toThrow(/not available yet/);
  });
});

describe.skipIf(!hasKvm())("virt-launcher with the native VMM on /dev/kvm", () => {
  let dir: string | undefined;
  let app: LauncherApp | undefined;
  afterEach(async () => {
    await app?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function launch(cmdline: string): Promise<{ client: LauncherClient; events: LauncherEvent[] }> {
    dir = mkdtempSync(join(tmpdir(), "kvt-native-"));
    const socketPath = launcherSocketPath(dir, "pod-n");
    app = await startLauncherApp({
      identity: { namespace: "default", name: "guest", uid: "vmi-n" },
      vmi: { metadata: { name: "guest", namespace: "default", uid: "vmi-n" } } as never,
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

  it("pauses and resumes a running guest, and kill ends it as a failure", async () => {
    const { client } = await launch("ws=4 every=256 lines=100000 rate=10");
    await client.sync();
    await client.pause();
    expect((await client.info()).state).toBe("Paused");
    await client.unpause();
    expect((await client.info()).state).toBe("Running");
    expect((await client.info()).notMigratableReason).toMatch(/not available yet/);
    await client.kill();
    await expect(app!.finished).resolves.toEqual({ state: "Crashed", reason: "Killed" });
  });
});
