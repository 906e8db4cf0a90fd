import { describe, expect, it } from "vitest";
import { VmmError } from "../errors.ts";
import { LineSplitter, type ShutdownEvent } from "../events.ts";
import type { VmControl, Vmm } from "../vm-control.ts";
import { FakeVmm } from "./fake-vmm.ts";

/** What an app does with a Vmm: start a guest, collect its console, answer on shutdown. */
async function runGuest(vmm: Vmm): Promise<{ vm: VmControl; lines: string[] }> {
  const vm = vmm.create({ memoryBytes: 64 << 20, kernel: { path: "/nonexistent/guest.elf" } });
  const lines: string[] = [];
  const splitter = new LineSplitter();
  vm.on("serial-output", (c) => lines.push(...splitter.push(c)));
  vm.start();
  await Promise.resolve();
  return { vm, lines };
}

describe("FakeVmm", () => {
  it("runs the VmControl lifecycle with console output and input echo", async () => {
    const vmm = new FakeVmm();
    const { vm, lines } = await runGuest(vmm);
    expect(vmm.vms).toHaveLength(1);
    expect(lines).toEqual(["fake-guest start"]);
    vm.writeSerial("ping\n");
    expect(lines.at(-1)).toBe("fake-guest input ping");
    vm.pause();
    expect(vm.state).toBe("paused");
    const blob = vm.saveState();
    vm.resume();
    expect(vm.stats()).toMatchObject({ state: "running", serialBytesIn: 5 });
    const target = vmm.create({ memoryBytes: 64 << 20 });
    target.restoreState(blob);
    target.start();
    expect(target.state).toBe("running");
  });

  it("reports guest shutdown as an event and refuses illegal transitions with VmmErrors", async () => {
    const vmm = new FakeVmm();
    const { vm } = await runGuest(vmm);
    const events: ShutdownEvent[] = [];
    vm.on("shutdown", (e) => events.push(e));
    vmm.vms[0]?.guestExit(3);
    expect(events).toEqual([{ reason: "guest-exit", code: 3 }]);
    expect(() => vm.pause()).toThrow(VmmError);
    expect(() => vmm.create({ memoryBytes: 64 << 20 }).start()).toThrow("no guest loaded");
    expect(() => vmm.create({ memoryBytes: 64 << 20 }).restoreState(new Uint8Array([1]))).toThrow(
      "restore-state: EINVAL",
    );
    expect(() => vmm.create({ memoryBytes: 12 })).toThrow(RangeError);
  });
});
