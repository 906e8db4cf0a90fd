/**
 * Time to write a 1 MiB config-volume ISO, for docs/decisions/0008-iso9660-writer.md: our in-process writer
 * (apps/virt-launcher/src/volumes/iso9660.ts) against what KubeVirt runs, `xorrisofs -volid cfgdata -joliet -rock
 * -graft-points -partition_cyl_align on` on files in a directory (xorriso from Debian; skipped when missing).
 * Two shapes: one 1 MiB value, and 1024 keys of 1 KiB (a ConfigMap at Kubernetes' 1 MiB cap).
 * Prints one JSON line with the median milliseconds. Run from the repository root:
 *   node docs/decisions/benches/iso9660-writer.bench.ts
 * Environment: BENCH_RUNS (runs per case, default 30).
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type IsoFileInput, writeIso9660 } from "../../../apps/virt-launcher/src/volumes/iso9660.ts";

const RUNS = Number(process.env.BENCH_RUNS ?? 30);
const timestamp = new Date("2026-01-01T00:00:00Z");

const shapes: Record<string, IsoFileInput[]> = {
  oneValue1MiB: [{ path: "user-data", data: Buffer.alloc(1024 * 1024, 0x61) }],
  keys1024x1KiB: Array.from({ length: 1024 }, (_, i) => ({ path: `key-${i}`, data: Buffer.alloc(1024, 0x62) })),
};

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return Number(s[Math.floor(s.length / 2)].toFixed(2));
}

function ours(files: IsoFileInput[]): number {
  const times: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now();
    writeIso9660({ volumeId: "cfgdata", files, timestamp });
    times.push(performance.now() - t0);
  }
  return median(times);
}

function xorrisofs(files: IsoFileInput[]): number | null {
  if (spawnSync("xorrisofs", ["-version"], { stdio: "ignore" }).status !== 0) return null;
  const dir = mkdtempSync(join(tmpdir(), "iso-bench-"));
  try {
    mkdirSync(join(dir, "src"));
    for (const f of files) writeFileSync(join(dir, "src", f.path), f.data);
    const grafts = files.map((f) => `${f.path}=${join(dir, "src", f.path)}`);
    const times: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const t0 = performance.now();
      const args = ["-output", join(dir, "out.iso"), "-volid", "cfgdata", "-joliet", "-rock", "-graft-points"];
      const r = spawnSync("xorrisofs", [...args, "-partition_cyl_align", "on", ...grafts], { stdio: "ignore" });
      times.push(performance.now() - t0);
      if (r.status !== 0) throw new Error(`xorrisofs exited ${r.status}`);
    }
    return median(times);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const result: Record<string, unknown> = { area: "iso9660-writer", runs: RUNS };
for (const [name, files] of Object.entries(shapes)) {
  result[name] = { oursMs: ours(files), xorrisofsMs: xorrisofs(files) };
}
process.stdout.write(`${JSON.stringify(result)}\n`);
