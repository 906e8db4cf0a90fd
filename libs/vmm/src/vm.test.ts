import { afterEach, describe, expect, it } from "vitest";
import { VmmError } from "./errors.ts";
import { LineSplitter, type ShutdownEvent, type VcpuExitEvent } from "./events.ts";
import { gpa } from "./gpa.ts";
import { hasKvm } from "./kvm.ts";
import { testGuestPath } from "./native.ts";
import { Vm } from "./vm.ts";

const kvm = hasKvm();
if (!kvm) console.warn("\n*** /dev/kvm is missing: the KVM tests of @kvt/vmm are SKIPPED on this machine ***\n");

const MiB = 1024 * 1024;
const live: Vm[] = [];
afterEach(() => {
  for (const vm of live.splice(0)) vm.stop();
});

/** A VM running the test guest whose lines are collected. */
function guest(cmdline: string, memoryBytes = 64 * MiB): { vm: Vm; lines: string[]; done: Promise<ShutdownEvent> } {
  const vm = Vm.create({ memoryBytes, kernel: { path: testGuestPath(), cmdline } });
  live.push(vm);
  return { vm, ...collect(vm) };
}

function collect(vm: Vm): { lines: string[]; done: Promise<ShutdownEvent> } {
  const lines: string[] = [];
  const splitter = new LineSplitter();
  vm.on("serial-output", (chunk) => lines.push(...splitter.push(chunk)));
  const done = new Promise<ShutdownEvent>((resolve) => vm.on("shutdown", resolve));
  return { lines, done };
}

async function until(predicate: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error("condition not reached in time");
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** A minimal ELF64 executable: `code` loaded at 1 MiB and entered there in long mode. */
function elfWith(code: number[]): Uint8Array {
  const buf = new Uint8Array(0x1000 + code.length);
  const v = new DataView(buf.buffer);
  buf.set([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1]);
  v.setUint16(16, 2, true); // ET_EXEC
  v.setUint16(18, 62, true); // EM_X86_64
  v.setUint32(20, 1, true);
  v.setBigUint64(24, 0x100000n, true); // entry
  v.setBigUint64(32, 64n, true); // phoff
  v.setUint16(52, 64, true);
  v.setUint16(54, 56, true);
  v.setUint16(56, 1, true);
  v.setUint32(64, 1, true); // PT_LOAD
  v.setUint32(68, 5, true);
  v.setBigUint64(72, 0x1000n, true); // offset
  v.setBigUint64(80, 0x100000n, true);
  v.setBigUint64(88, 0x100000n, true);
  v.setBigUint64(96, BigInt(code.length), true);
  v.setBigUint64(104, BigInt(code.length), true);
  buf.set(code, 0x1000);
  return buf;
}

describe.skipIf(!kvm)("Vm on /dev/kvm", () => {
  it("boots the test guest and reads its progress lines to the end", async () => {
    const { lines, done } = guest("ws=16 every=1024 lines=3 seed=7");
    const { vm } = { vm: live[0] };
    vm?.start();
    expect(await done).toEqual({ reason: "guest-exit", code: 0 });
    expect(lines[0]).toBe("kvt-guest start ws=16 pattern=seq rate=0 seed=7 every=1024 lines=3");
    expect(lines.slice(1, 4).map((l) => l.replace(/sum=0x[0-9a-f]{16}/, "sum=X"))).toEqual([
      "kvt-guest progress n=1 pages=1024 sum=X",
      "kvt-guest progress n=2 pages=2048 sum=X",
      "kvt-guest progress n=3 pages=3072 sum=X",
    ]);
    expect(lines[4]).toMatch(/^kvt-guest done n=3 sum=0x[0-9a-f]{16}$/);
    const stats = vm?.stats();
    expect(stats?.vcpuSeconds).toHaveLength(1);
    expect(stats?.vcpuSeconds[0]).toBeGreaterThan(0);
    expect(stats?.serialBytesOut).toBe(lines.join("\n").length + 1);
    expect(vm?.state).toBe("stopped");
  });

  it("prints the same lines for the same parameters, and different ones for another seed", async () => {
    const runs = ["seed=3", "seed=3", "seed=4"].map((seed) => guest(`ws=8 pattern=random every=512 lines=4 ${seed}`));
    for (const r of runs) r.vm.start();
    await Promise.all(runs.map((r) => r.done));
    expect(runs[0]?.lines).toEqual(runs[1]?.lines);
    expect(runs[0]?.lines.at(-1)).not.toEqual(runs[2]?.lines.at(-1));
  });

  it("pause() stops progress and resume() continues where it stopped", async () => {
    const ref = guest("ws=16 every=256 lines=12 rate=20");
    const run = guest("ws=16 every=256 lines=12 rate=20");
    ref.vm.start();
    run.vm.start();
    await until(() => run.lines.length >= 3);
    run.vm.pause();
    expect(run.vm.state).toBe("paused");
    const atPause = run.vm.stats().serialBytesOut; // the UART's own counter: frozen while no vCPU runs
    await new Promise((r) => setTimeout(r, 300));
    expect(run.vm.stats().serialBytesOut).toBe(atPause);
    run.vm.resume();
    expect(run.vm.state).toBe("running");
    await Promise.all([ref.done, run.done]);
    expect(run.lines).toEqual(ref.lines);
  });

  it("saves the machine state and restores it into a fresh Vm that continues with identical output", async () => {
    const cmdline = "ws=32 every=512 lines=16 rate=40";
    const ref = guest(cmdline);
    ref.vm.start();
    const src = Vm.create({ memoryBytes: 64 * MiB, kernel: { path: testGuestPath(), cmdline } });
    live.push(src);
    const lines: string[] = [];
    const splitter = new LineSplitter(); // one byte stream across both Vms: the pause may land mid-line
    src.on("serial-output", (chunk) => lines.push(...splitter.push(chunk)));
    src.start();
    await until(() => lines.length >= 4);
    src.pause();
    const blob = src.saveState();
    expect(new TextDecoder().decode(blob.subarray(0, 4))).toBe("KVTS");

    const dst = Vm.create({ memoryBytes: 64 * MiB });
    live.push(dst);
    const done = new Promise<ShutdownEvent>((resolve) => dst.on("shutdown", resolve));
    for (const r of src.regions()) {
      for (let off = 0; off < r.sizeBytes; off += 16 * MiB) {
        const a = gpa(r.baseGpa + BigInt(off));
        dst.writeMemory(a, src.readMemory(a, Math.min(16 * MiB, r.sizeBytes - off)));
      }
    }
    dst.restoreState(blob);
    src.stop(); // pause() emitted everything written before it
    dst.on("serial-output", (chunk) => lines.push(...splitter.push(chunk)));
    dst.start();
    await Promise.all([ref.done, done]);
    expect(lines).toEqual(ref.lines);
  });

  it("hops through 8 fresh Vms mid-output (pause, copy memory, save, restore, start) with output identical to a run that never moved", async () => {
    // 240 lines at 30/s: the last hop (line 88) leaves the guest 5 s of output, slack for a loaded CI machine.
    const cmdline = "ws=16 every=64 lines=240 rate=30";
    const ref = guest(cmdline, 32 * MiB);
    ref.vm.start();
    const first = Vm.create({ memoryBytes: 32 * MiB, kernel: { path: testGuestPath(), cmdline } });
    live.push(first);
    const lines: string[] = [];
    const splitter = new LineSplitter(); // one byte stream across every hop: a line may straddle two Vms
    first.on("serial-output", (chunk) => lines.push(...splitter.push(chunk)));
    let current = { vm: first, done: new Promise<ShutdownEvent>((resolve) => first.on("shutdown", resolve)) };
    current.vm.start();
    for (let hop = 0; hop < 8; hop++) {
      await until(() => lines.length >= 4 + hop * 12);
      await new Promise((r) => setTimeout(r, hop)); // vary the point where the pause lands
      current.vm.pause();
      const blob = current.vm.saveState();
      const next = Vm.create({ memoryBytes: 32 * MiB });
      live.push(next);
      for (const r of current.vm.regions()) next.writeMemory(r.baseGpa, current.vm.readMemory(r.baseGpa, r.sizeBytes));
      next.restoreState(blob);
      current.vm.stop();
      next.on("serial-output", (chunk) => lines.push(...splitter.push(chunk)));
      current = { vm: next, done: new Promise<ShutdownEvent>((resolve) => next.on("shutdown", resolve)) };
      next.start();
    }
    await Promise.all([ref.done, current.done]);
    expect(lines).toEqual(ref.lines);
  }, 60_000);

  it("collects dirty pages from KVM's log merged with the pages the VMM wrote", async () => {
    const run = guest("ws=8 every=256 lines=0");
    run.vm.start();
    await until(() => run.lines.length >= 1);
    run.vm.startDirtyLog();
    let dirtied = 0;
    const deadline = Date.now() + 20_000;
    while (dirtied === 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20)); // eventually: the guest may not have run since the log started
      const [region] = await run.vm.collectDirty();
      expect(region?.baseGpa).toBe(0n);
      expect(region?.pages).toBe(16384);
      dirtied += region?.dirtyPages ?? 0;
    }
    expect(dirtied).toBeGreaterThan(0);
    run.vm.pause();
    await run.vm.collectDirty(); // drain what the guest wrote before the pause
    run.vm.writeMemory(gpa(60 * MiB + 5), new Uint8Array([1, 2, 3]));
    const after = await run.vm.collectDirty();
    expect(after[0]?.dirtyPages).toBe(1);
    const page = (60 * MiB) / 4096;
    expect(
      new DataView(after[0]?.bitmap.buffer ?? new ArrayBuffer(0), after[0]?.bitmap.byteOffset).getUint8(page >> 3),
    ).toBe(1 << (page & 7));
    run.vm.stopDirtyLog();
    await expect(run.vm.collectDirty()).rejects.toMatchObject({ syscall: "KVM_GET_DIRTY_LOG", code: "EINVAL" });
  });

  it("delivers serial input to the guest", async () => {
    const run = guest("pattern=idle tick=20 lines=40");
    run.vm.start();
    await until(() => run.lines.length >= 2);
    run.vm.writeSerial("hello\n");
    await until(() => run.lines.includes("kvt-guest input hello"));
    expect(run.vm.stats().serialBytesIn).toBe(6);
  });

  it("turns what the guest does wrong into events: an MMIO write nobody handles, then a triple fault", async () => {
    // mov %al, 0x40000000 (beyond RAM, inside the identity map) ; ud2 with no IDT -> triple fault
    const image = elfWith([0x88, 0x04, 0x25, 0x00, 0x00, 0x00, 0x40, 0x0f, 0x0b]);
    const vm = Vm.create({ memoryBytes: 32 * MiB, kernel: { image } });
    live.push(vm);
    const exits: VcpuExitEvent[] = [];
    vm.on("vcpu-exit", (e) => exits.push(e));
    const done = new Promise<ShutdownEvent>((resolve) => vm.on("shutdown", resolve));
    vm.start();
    expect((await done).reason).toBe("triple-fault");
    expect(exits[0]).toEqual({ vcpu: 0, reason: "KVM_EXIT_MMIO write 0x40000000 len 1", fatal: false });
    expect(exits.at(-1)?.fatal).toBe(true);
  });

  it("reports an i8042 reset (0xfe to port 0x64) as a shutdown with reason reset", async () => {
    const image = elfWith([0xb0, 0xfe, 0xe6, 0x64, 0xf4]); // mov $0xfe,%al ; out %al,$0x64 ; hlt
    const vm = Vm.create({ memoryBytes: 32 * MiB, kernel: { image } });
    live.push(vm);
    const done = new Promise<ShutdownEvent>((resolve) => vm.on("shutdown", resolve));
    vm.start();
    expect(await done).toEqual({ reason: "reset", code: 0 });
    expect(vm.state).toBe("stopped");
  });

  it("keeps running under an auto-converge throttle and after it is lifted", async () => {
    const run = guest("ws=8 every=128 lines=0");
    run.vm.start();
    run.vm.setCpuThrottle(90);
    const seen = run.lines.length;
    await until(() => run.lines.length >= seen + 2);
    run.vm.setCpuThrottle(0);
    const later = run.lines.length;
    await until(() => run.lines.length >= later + 2);
    expect(run.vm.stats().kicks).toBeGreaterThan(0);
    expect(() => run.vm.setCpuThrottle(100)).toThrow(RangeError);
  });

  it("names the failed operation in typed errors", () => {
    const vm = Vm.create({ memoryBytes: 32 * MiB });
    live.push(vm);
    expect(() => vm.start()).toThrow(VmmError);
    try {
      vm.restoreState(new Uint8Array([1, 2, 3]));
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(VmmError);
      expect(e).toMatchObject({ code: "EINVAL", errno: 22, syscall: "restore-state" });
      expect((e as Error).message).toBe("restore-state: EINVAL (bad magic)");
    }
    expect(() => vm.readMemory(gpa(31 * MiB), 2 * MiB)).toThrow("guest-memory: EFAULT");
    expect(() => Vm.create({ memoryBytes: 32 * MiB, kernel: { image: new Uint8Array(10) } })).toThrow(
      "elf: EINVAL (shorter than an ELF header)",
    );
  });
});

describe("Vm options", () => {
  it.each([
    [{ memoryBytes: 1000 }, RangeError],
    [{ memoryBytes: 32 * MiB + 1 }, RangeError],
    [{ memoryBytes: 32 * MiB, vcpus: 0 }, RangeError],
    [{ memoryBytes: 32 * MiB, vcpus: 1.5 }, TypeError],
    [{ memoryBytes: "1Gi" }, TypeError],
    [{ memoryBytes: 32 * MiB, kernel: {} }, TypeError],
  ])("rejects %o before touching KVM", (options, type) => {
    expect(() => Vm.create(options as never)).toThrow(type);
  });
});
