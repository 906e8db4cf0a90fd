/**
 * Time to turn a containerDisk image into the VMI's private raw copy, for docs/decisions/0009-containerdisk-copy.md:
 * our importDiskImage (apps/virt-launcher/src/volumes/disk-image.ts) against `qemu-img convert -O raw` (Debian's
 * qemu-utils) on the same 256 MiB image with about half of its 64 KiB chunks holding data, side by side in one run.
 * Shapes: qcow2, compressed qcow2 (-c), and the raw image itself (where copyFileSync, today's prepareDisks, is shown
 * too). Page cache warm for every tool (one unmeasured run first); each run writes a new file (the previous
 * output is removed, unmeasured); ours and qemu-img runs alternate, so both see the same load. Wall and CPU time
 * (user + system of all threads: the figure that load on a shared machine disturbs least). Prints one JSON line of median milliseconds.
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

/** Wall and CPU (user + system, every thread) milliseconds of one run. */
interface Sample {
  readonly wallMs: number;
  readonly cpuMs: number;
}

async function oursOnce(image: string, output: string): Promise<Sample> {
  rmSync(output, { force: true });
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await importDiskImage(image, output);
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return { wallMs, cpuMs: (cpu.user + cpu.system) / 1000 };
}

/** qemu-img under bash, whose `times` gives the child's CPU time (bash's start adds ~2 ms of wall time). */
function qemuOnce(image: string, output: string): Sample {
  rmSync(output, { force: true });
  const script = 'qemu-img convert -O raw "$1" "$2" && times';
  const t0 = performance.now();
  const r = spawnSync("bash", ["-c", script, "bash", image, output], { encoding: "utf8" });
  const wallMs = performance.now() - t0;
  const m = /(\d+)m([\d.]+)s (\d+)m([\d.]+)s\s*$/.exec(r.stdout);
  if (r.status !== 0 || !m) throw new Error(`qemu-img convert failed: ${r.stderr}`);
  const cpuMs = (Number(m[1]) * 60 + Number(m[2]) + Number(m[3]) * 60 + Number(m[4])) * 1000;
  return { wallMs, cpuMs };
}

/** Medians over RUNS interleaved runs (ours, qemu-img, ours, ...) after one warm-up of each. */
async function compare(image: string, ours: string, theirs: string) {
  await oursOnce(image, ours);
  qemuOnce(image, theirs);
  const a: Sample[] = [];
  const b: Sample[] = [];
  for (let i = 0; i < RUNS; i++) {
    a.push(await oursOnce(image, ours));
    b.push(qemuOnce(image, theirs));
  }
  const wall = { ours: median(a.map((x) => x.wallMs)), qemu: median(b.map((x) => x.wallMs)) };
  const cpu = { ours: median(a.map((x) => x.cpuMs)), qemu: median(b.map((x) => x.cpuMs)) };
  return {
    oursMs: wall.ours,
    qemuImgConvertMs: wall.qemu,
    ratio: Number((wall.ours / wall.qemu).toFixed(2)),
    oursCpuMs: cpu.ours,
    qemuImgConvertCpuMs: cpu.qemu,
    cpuRatio: Number((cpu.ours / cpu.qemu).toFixed(2)),
  };
}

function copyFileSyncMs(raw: string, output: string): number {
  const times: number[] = [];
  for (let i = 0; i <= RUNS; i++) {
    rmSync(output, { force: true });
    const t0 = performance.now();
    copyFileSync(raw, output);
    if (i > 0) times.push(performance.now() - t0); // the first run warms the cache
  }
  return median(times);
}

function sameBytes(a: string, b: string): boolean {
  return spawnSync("cmp", ["-s", a, b]).status === 0;
}

async function main(): Promise<void> {
  await ensureQemuUtils();
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
      result[shape] = {
        imageBytes: statSync(image).size,
        ...(await compare(image, ours, theirs)),
        identical: sameBytes(ours, theirs),
        oursAllocatedBytes: statSync(ours).blocks * 512,
        qemuAllocatedBytes: statSync(theirs).blocks * 512,
      };
      if (shape === "raw") result[shape].copyFileSyncMs = copyFileSyncMs(raw, join(dir, "cp.raw"));
    }
    console.log(JSON.stringify({ area: "containerdisk-copy", virtualMiB: MIB, runs: RUNS, ...result }));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
