/**
 * The boot bench, run INSIDE the L1 host (bench/boot.bench.ts starts it): the demo image (1 vCPU, 256 MiB, the same
 * kernel build, initramfs and NoCloud seed) booted N times each way, in turn:
 *   kvt          our VMM, the image's uncompressed kernel (ELF vmlinux, the launcher's native backend's choice)
 *   kvt-bzimage  our VMM, the bzImage (the kernel decompresses itself)
 *   qemu         QEMU `-accel kvm -M microvm -kernel` with the bzImage
 *   qemu-vmlinux QEMU microvm with the vmlinux (PVH entry: Debian's kernel has the PVH ELF note)
 * Each sample is one line `KVT_NESTED_BENCH {"vmm","run","kernelFirstLineMs","bootMarkerMs"}`; times are from the
 * VMM's start (Vm.create / QEMU spawn) to the first console byte (the kernel's first line: with `quiet` only its
 * errors print) and to the init's boot marker.
 */
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { DEMO_BOOT_MARKER, DEMO_LINUX_IMAGE, defaultStoreRoot, imageDir } from "@kvt/images";
import { joinInitrd, noCloudSeedInitrd } from "@kvt/vmm";
import { bootDemo, CLOUD_INIT_LINE } from "./demo-guest.ts";
import { GuestConsole } from "./guest-console.ts";

const runs = Number(process.argv[2] ?? 5);
const TIMEOUT_MS = 240_000;
const marker = new RegExp(DEMO_BOOT_MARKER);

function sample(vmm: string, run: number, firstMs: number | undefined, markerMs: number): void {
  const s = { vmm, run, kernelFirstLineMs: Math.round(firstMs ?? -1), bootMarkerMs: Math.round(markerMs) };
  process.stdout.write(`KVT_NESTED_BENCH ${JSON.stringify(s)}\n`);
}

async function ours(run: number, kernel: "uncompressed" | "bzImage"): Promise<void> {
  const g = bootDemo({ userData: `#!/bin/sh\necho "${CLOUD_INIT_LINE}"\n`, kernel });
  const m = await g.console.waitFor(marker, TIMEOUT_MS);
  // The console starts before Vm.create: times include it.
  sample(kernel === "bzImage" ? "kvt-bzimage" : "kvt", run, g.console.firstByteMs, m.atMs);
  g.vm.stop();
}

async function qemu(run: number, initrd: string, kernelFile: string): Promise<void> {
  const dir = imageDir(defaultStoreRoot(), DEMO_LINUX_IMAGE);
  const console = new GuestConsole();
  const args = [
    ...["-accel", "kvm", "-cpu", "host", "-m", "256", "-smp", "1", "-nodefaults", "-no-user-config"],
    ...["-nographic", "-display", "none", "-serial", "stdio", "-no-reboot"],
    ...["-M", "microvm,x-option-roms=off,pit=off,pic=off,isa-serial=on,rtc=off"],
    ...["-kernel", join(dir, kernelFile), "-initrd", initrd, "-append", "console=ttyS0 quiet panic=-1 acpi=off"],
  ];
  const child = spawn("qemu-system-x86_64", args, { stdio: ["ignore", "pipe", "pipe"] });
  child.stdout.on("data", (c: Buffer) => console.feed(c));
  try {
    const m = await console.waitFor(marker, TIMEOUT_MS);
    sample(kernelFile === "vmlinuz" ? "qemu" : "qemu-vmlinux", run, console.firstByteMs, m.atMs);
  } finally {
    child.kill("SIGKILL");
  }
}

const dir = imageDir(defaultStoreRoot(), DEMO_LINUX_IMAGE);
const seed = noCloudSeedInitrd({
  metaData: "instance-id: nested.demo\nlocal-hostname: demo\n",
  userData: `#!/bin/sh\necho "${CLOUD_INIT_LINE}"\n`,
});
const initrd = "/tmp/kvt-bench-initrd.img";
writeFileSync(initrd, joinInitrd([readFileSync(join(dir, "initrd.img")), seed]));
const VARIANTS = ["kvt", "kvt-bzimage", "qemu", "qemu-vmlinux"] as const;
for (let i = 1; i <= runs; i++) {
  for (const name of VARIANTS) {
    try {
      if (name === "kvt") await ours(i, "uncompressed");
      else if (name === "kvt-bzimage") await ours(i, "bzImage");
      else await qemu(i, initrd, name === "qemu" ? "vmlinuz" : "vmlinux");
    } catch (err) {
      process.stdout.write(`KVT_NESTED_BENCH_ERROR ${name} ${(err as Error).message}\n`);
    }
  }
}
process.exit(0);
