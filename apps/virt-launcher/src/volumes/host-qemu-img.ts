/**
 * Test and bench support only (the launcher never imports it): Debian's qemu-img and qemu-io (package qemu-utils),
 * the reference that disk-image.ts is compared against. Installed by @kvt/runtime's ensureHostTools when missing
 * (apt-get when running as root, as CI does).
 */
import { spawnSync } from "node:child_process";
import { closeSync, ftruncateSync, openSync, writeSync } from "node:fs";
import { ensureHostTools, type HostTool } from "@kvt/runtime";

/** qemu-img and qemu-io, from Debian's qemu-utils. */
const QEMU_UTILS: readonly HostTool[] = [
  { bin: "qemu-img", pkg: "qemu-utils" },
  { bin: "qemu-io", pkg: "qemu-utils" },
];

/** Makes sure qemu-img and qemu-io exist, installing qemu-utils when root; rejects naming the command otherwise. */
export function ensureQemuUtils(): Promise<void> {
  return ensureHostTools(QEMU_UTILS);
}

/** Runs qemu-img with `args`; throws with its stderr when it fails. */
export function qemuImg(...args: string[]): string {
  const r = spawnSync("qemu-img", args, { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`qemu-img ${args.join(" ")} failed (${r.status}): ${r.stderr}`);
  return r.stdout;
}

/** Runs qemu-io commands (`write -P 0xab 0 64k`, `write -z 1M 64k`...) on a qcow2 file. */
export function qemuIo(file: string, ...commands: string[]): void {
  const args = ["-f", "qcow2", ...commands.flatMap((c) => ["-c", c]), file];
  const r = spawnSync("qemu-io", args, { encoding: "utf8" });
  if (r.status !== 0 || /error|failed/i.test(r.stdout)) throw new Error(`qemu-io ${args.join(" ")}: ${r.stdout}`);
}

/** A small seeded PRNG (mulberry32): the same seed gives the same images and mutations on every run. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Writes a sparse raw file of `sizeBytes` where about `fraction` of its 64 KiB chunks hold seeded data (some chunks
 * only a 512-byte island, so zero detection below a cluster is exercised); the rest are holes. The data are words
 * drawn from a small per-chunk table: compressible (so `qemu-img convert -c` really compresses) yet never constant.
 */
export function writePatternRaw(path: string, sizeBytes: number, seed: number, fraction = 0.5): void {
  const random = seededRandom(seed);
  const fd = openSync(path, "w");
  try {
    ftruncateSync(fd, sizeBytes);
    const chunk = Buffer.alloc(64 * 1024);
    for (let off = 0; off < sizeBytes; off += chunk.length) {
      if (random() >= fraction) continue;
      const words = Array.from({ length: 16 }, () => (random() * 2 ** 32) >>> 0);
      for (let i = 0; i < chunk.length; i += 4) chunk.writeUInt32LE(words[Math.floor(random() * 16)], i);
      const island = random() < 0.25;
      const length = Math.min(island ? 512 : chunk.length, sizeBytes - off);
      writeSync(fd, chunk, 0, length, off + (island ? 4096 : 0));
    }
  } finally {
    closeSync(fd);
  }
}
