/**
 * The test guest waits without burning the host core: on our VMM its idle ticks and rate pacing sleep in the
 * VMM (the test port's idle request) instead of spinning, so N idle guests cost N x almost nothing. Its output stays
 * the same bytes as under QEMU (PVH, TCG), where the idle port is absent and it spins.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { hasKvm, LineSplitter, testGuestPath, Vm } from "@kvt/vmm";
import { describe, expect, it } from "vitest";

const qemu = spawnSync("qemu-system-x86_64", ["--version"], { encoding: "utf8" }).status === 0;

interface Run {
  readonly lines: string[];
  readonly vcpuSeconds: number;
  readonly wallSeconds: number;
}

/** Runs the guest on our VMM until it exits; the vCPU thread's CPU time is read just before it stops. */
function runOnVmm(cmdline: string): Promise<Run> {
  const vm = Vm.create({ memoryBytes: 64 << 20, kernel: { path: testGuestPath(), cmdline } });
  const lines: string[] = [];
  const splitter = new LineSplitter();
  let vcpuSeconds = 0;
  vm.on("serial-output", (c) => {
    lines.push(...splitter.push(c));
    // The last line is printed just before the exit request: sample the vCPU's CPU time while it still runs.
    if (lines.at(-1)?.startsWith("kvt-guest done")) vcpuSeconds = vm.stats().vcpuSeconds[0] ?? 0;
  });
  const start = performance.now();
  return new Promise((resolve) => {
    vm.on("shutdown", () => {
      const wallSeconds = (performance.now() - start) / 1000;
      vm.stop();
      resolve({ lines, vcpuSeconds, wallSeconds });
    });
    vm.start();
  });
}

/** The guest's console under QEMU, written to a file (a pipe can refuse bytes that QEMU then drops at exit). */
function runOnQemu(cmdline: string): string[] {
  const dir = mkdtempSync(join(tmpdir(), "kvt-idle-"));
  const log = join(dir, "serial.log");
  const r = spawnSync(
    "qemu-system-x86_64",
    [
      ...["-accel", "tcg", "-m", "64", "-nodefaults", "-no-user-config", "-display", "none", "-serial", `file:${log}`],
      ...["-no-reboot", "-kernel", testGuestPath(), "-append", cmdline],
      ...["-device", "isa-debug-exit,iobase=0xf4,iosize=4"],
    ],
    { encoding: "utf8", timeout: 60_000 },
  );
  expect(r.status).toBe(1); // isa-debug-exit: (0 << 1) | 1, the guest's exit code 0 (the idle port never written)
  const out = readFileSync(log, "utf8");
  rmSync(dir, { recursive: true, force: true });
  return out.split("\n").flatMap((l) => {
    const at = l.indexOf("kvt-guest");
    return at >= 0 ? [l.slice(at).replace(/\r$/, "")] : [];
  });
}

describe.skipIf(!hasKvm())("the test guest at rest", () => {
  // Budgets are absolute vCPU time, not a share of the wall time: on a loaded machine a spinning guest gets only
  // its share of a core, at load 20 on 2 cores still ~200 ms a second, while sleeping costs ~1 ms a tick (PVM exits are dear).
  it("idles through its ticks asleep in the VMM: 40 ticks of 25 ms cost a few ms of vCPU time", async () => {
    const run = await runOnVmm("pattern=idle ws=1 tick=25 lines=40");
    expect(run.lines[0]).toBe("kvt-guest start ws=1 pattern=idle rate=0 seed=1 every=4096 lines=40");
    expect(run.lines).toHaveLength(42);
    expect(run.wallSeconds).toBeGreaterThanOrEqual(0.95); // the ticks were waited for...
    // vCPU time is counted in scheduler ticks: a guest asleep almost all along may show 0.
    expect(run.vcpuSeconds).toBeGreaterThanOrEqual(0);
    // ...asleep, not spinning: that costs 0.2 s on a host at load 20, the whole second in the nested lane's L1 (one
    // CPU, nothing else running), where each of the ~41 round trips through the VMM costs ~5 ms of emulated exits.
    expect(run.vcpuSeconds).toBeLessThan(process.env.KVT_NESTED_L1 ? 0.5 : 0.1);
  }, 60_000);

  it("paces its dirtying rate asleep too (rate=2 MiB/s over 1 MiB)", async () => {
    const run = await runOnVmm("ws=1 every=128 rate=2 lines=6");
    expect(run.lines).toHaveLength(8);
    expect(run.wallSeconds).toBeGreaterThanOrEqual(1.45); // 768 pages at 512 pages/s
    // Spinning: 0.34 s on a host at load 20; in the nested lane's L1 (one CPU, nothing else running) the whole 1.5 s,
    // while sleeping costs its emulated exits there (0.123 s seen), so L1 gets half the wall time as its bound.
    expect(run.vcpuSeconds).toBeLessThan(process.env.KVT_NESTED_L1 ? 0.75 : 0.12);
  }, 60_000);

  it.skipIf(!qemu)(
    "prints the same bytes as under QEMU, where it has no idle port and spins",
    async () => {
      for (const cmdline of ["pattern=idle ws=2 tick=10 lines=5", "ws=1 every=64 rate=4 seed=3 lines=3"]) {
        const ours = await runOnVmm(cmdline);
        expect(runOnQemu(cmdline)).toEqual(ours.lines);
      }
    },
    120_000,
  );
});
