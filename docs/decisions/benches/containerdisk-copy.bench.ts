/**
 * Time to turn a containerDisk image into the VMI's private raw copy, for docs/decisions/0009-containerdisk-copy.md:
 * our importDiskImage (apps/virt-launcher/src/volumes/disk-image.ts) against `qemu-img convert -O raw` (Debian's
 * qemu-utils) on the same 256 MiB image with about half of its 64 KiB chunks holding data, side by side in one run.
 * Shapes: qcow2, compressed qcow2 (-c), and the raw image itself (where copyFileSync, today's prepareDisks, is shown
 * too). Page cache warm for every tool (one unmeasured run first); each run writes a new file (the previous
 * output is removed, unmeasured). Per shape: ours, then qemu-img, then (raw) copyFileSync. Prints one JSON line of median milliseconds.
 * Run from the repository root:
 *   node docs/decisions/benches/containerdisk-copy.bench.ts
 * Environment: BENCH_RUNS (runs per case, default 5), BENCH_MIB (virtual size, default 256).
 */
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { importDiskImage } from "../../../apps/virt-launcher/src/volumes/disk-image.ts";
import { ensureQemuUtils, qemuImg, writePatternRaw } from "../../../apps/virt-launcher/src/volumes/host-qemu-img.ts";

const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const MIB = Number(process.env.BENCH_MIB ?? 256);

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return Number(s[Math.floor(s.length / 2)].toFixed(1));
}

/** Median ms of `fn` over RUNS runs after one warm-up; `output` is removed (unmeasured) before each run. */
async function timed(output: string, fn: () => unknown): Promise<number> {
  rmSync(output, { force: true });
  await fn(); // warm the page cache and the code path
  const times: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    rmSync(output, { force: true });
    const t0 = performance.now();
    await fn();
    times.push(performance.now() - t0);
  }
  return median(times);
}

function sameBytes(a: string, b: string): boolean {
  return spawnSync("cmp", ["-s", a, b]).status === 0;
}

async function main(): Promise<void> {
  ensureQemuUtils();
  const dir = mkdtempSync(join(tmpdir(), "kvt-containerdisk-bench-"));
  try {
    const raw = join(dir, "disk.raw");
    writePatternRaw(raw, MIB * 1024 * 1024, 2026, 0.5);
    const images: Record<string, string> = { qcow2: join(dir, "disk.qcow2"), qcow2Compressed: join(dir, "c.qcow2") };
    qemuImg("convert", "-O", "qcow2", raw, images.qcow2);
    qemuImg("convert", "-c", "-O", "qcow2", raw, images.qcow2Compressed);
    images.raw = raw;
    const result: Record<string, Record<string, number | boolean>> = {};
    for (const [shape, image] of Object.entries(images)) {
      const ours = join(dir, `${shape}.ours.raw`);
      const theirs = join(dir, `${shape}.qemu.raw`);
      const oursMs = await timed(ours, () => importDiskImage(image, ours));
      const qemuMs = await timed(theirs, () => qemuImg("convert", "-O", "raw", image, theirs));
      result[shape] = {
        imageBytes: statSync(image).size,
        oursMs,
        qemuImgConvertMs: qemuMs,
        ratio: Number((oursMs / qemuMs).toFixed(2)),
        identical: sameBytes(ours, theirs),
        oursAllocatedBytes: statSync(ours).blocks * 512,
        qemuAllocatedBytes: statSync(theirs).blocks * 512,
      };
      const cp = join(dir, "cp.raw");
      if (shape === "raw") result[shape].copyFileSyncMs = await timed(cp, () => copyFileSync(raw, cp));
    }
    console.log(JSON.stringify({ area: "containerdisk-copy", virtualMiB: MIB, runs: RUNS, ...result }));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
