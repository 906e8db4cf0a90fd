import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LineSplitter } from "./events.ts";
import { hasKvm } from "./kvm.ts";
import { testGuestPath } from "./native.ts";
import { Vm } from "./vm.ts";

const qemu = spawnSync("qemu-system-x86_64", ["--version"], { encoding: "utf8" }).status === 0;
if (!qemu) console.warn("\n*** qemu-system-x86_64 is missing: the PVH cross-check of the test guest is SKIPPED ***\n");

function runOnVmm(cmdline: string): Promise<string[]> {
  const vm = Vm.create({ memoryBytes: 128 << 20, kernel: { path: testGuestPath(), cmdline } });
  const lines: string[] = [];
  const splitter = new LineSplitter();
  vm.on("serial-output", (c) => lines.push(...splitter.push(c)));
  return new Promise((resolve) => {
    vm.on("shutdown", () => {
      vm.stop();
      resolve(lines);
    });
    vm.start();
  });
}

describe.skipIf(!qemu || !hasKvm())("the test guest", () => {
  it("boots unchanged under QEMU -kernel (PVH, TCG) and prints exactly what it prints on our VMM", async () => {
    const cmdline = "ws=8 pattern=random seed=11 every=256 lines=4";
    // The console goes to a file: QEMU writes -serial stdio to a pipe without blocking and drops what the pipe
    // refuses at exit (a CI run lost the last lines, mid-line).
    const dir = mkdtempSync(join(tmpdir(), "kvt-pvh-"));
    const log = join(dir, "serial.log");
    const r = spawnSync(
      "qemu-system-x86_64",
      [
        ...["-accel", "tcg", "-m", "128", "-nodefaults", "-no-user-config", "-display", "none"],
        ...["-serial", `file:${log}`, "-no-reboot", "-kernel", testGuestPath(), "-append", cmdline],
        ...["-device", "isa-debug-exit,iobase=0xf4,iosize=4"],
      ],
      { encoding: "utf8", timeout: 60_000 },
    );
    expect(r.status).toBe(1); // isa-debug-exit: (0 << 1) | 1, the guest's exit code 0
    const output = readFileSync(log, "utf8");
    rmSync(dir, { recursive: true, force: true });
    const qemuLines = output.split("\n").flatMap((l) => {
      const at = l.indexOf("kvt-guest");
      return at >= 0 ? [l.slice(at).replace(/\r$/, "")] : [];
    });
    const ours = await runOnVmm(cmdline);
    expect(ours).toHaveLength(6);
    expect(qemuLines).toEqual(ours);
  }, 90_000);
});
