/**
 * The nested lane's copied-disk migration (`boot.disks[i].migrate: "copy"`, a local disk such as a containerDisk
 * overlay or an emptyDisk): the target VMM process gets its own empty sparse file of the same size, and the
 * migration stream carries the disk (bulk pass, then the 64 KiB blocks the guest writes meanwhile, the last ones at
 * switch-over) while the guest writes records with fsync.
 *
 *   source.img 128 MiB: holes, 48 MiB of data at 16 MiB     target.img 128 MiB: all hole (a fresh sparse file)
 *   guest: writer (disk-writer.ts) a1 a2 ... --- migration (copy) ---> ... a<n> on the target; stop; end=<N>
 *          copier: dd 8 MiB [16, 24) MiB -> [80, 88) MiB with fsync, then sleep 1 s, over and over (MiBs of dirty
 *          blocks every round, on the source and on the target)
 *   guest (target): drop caches, md5sum of records 1..N read back from /dev/vda == the host's md5 of r1..rN,
 *                   md5sum of [80, 88) MiB == the host's of source.img's [16, 24) MiB
 *   host after power-off: every acknowledged record in target.img; the 48 MiB data region equals source.img's, the
 *                         copier's region equals its source
 *
 *   boot 4 (overlay: true, a containerDisk's copy-on-write disk, `boot.disks[i].base`): the host's data sits in a
 *   base.img both VMM processes read and never write; source.img and target.img are empty overlays over it. The same
 *   writer, copier and guest checksums; the stream carries only the granules the guest wrote (not the 48 MiB of
 *   base data), and base.img's md5 after power-off is the md5 it had before boot.
 */
import { createHash, randomBytes } from "node:crypto";
import { closeSync, mkdtempSync, openSync, rmSync, statSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEMO_BOOT_MARKER } from "@kvt/images";
import { OutgoingMigration } from "@kvt/migration";
import { check, converse, typeLine, within } from "./check-runner.ts";
import { bootDemo, type DemoGuest } from "./demo-guest.ts";
import {
  acks,
  consolePeer,
  makeImage,
  readAt,
  SECTOR,
  targetConsolePeer,
  typeEchoed,
  WRITER_BASE_SECTOR,
  WRITER_SCRIPT,
  writerRecord,
} from "./disk-writer.ts";
import { laneMigrationOptions, spawnTarget, type TargetPeer } from "./migration-peer.ts";

/** The copied disk: 128 MiB, mostly holes. */
export const COPY_DISK_BYTES = 128 * 2 ** 20;
const MIB = 2 ** 20;
/** Where the host writes data before boot (the guest never writes there): [16 MiB, 64 MiB). */
const DATA_AT = 16 * MIB;
const DATA_BYTES = 48 * MIB;

/** Where the guest's copier writes (from DATA_AT) and how much: [80, 88) MiB. */
const COPY_TO = 80 * MIB;
const COPY_BYTES = 8 * MIB;
/** The copier, typed line by line into /tmp/c.sh like the writer; prints c1/ after its first pass, cend=<n>/ at stop. */
const COPIER_SCRIPT = [
  `n=0;a="bs=1M skip=${DATA_AT / MIB} seek=${COPY_TO / MIB} count=${COPY_BYTES / MIB}"`,
  "while [ ! -f /tmp/stop ];do",
  "dd if=/dev/vda of=/dev/vda $a conv=fsync",
  "n=$((n+1));[ $n = 1 ]&&echo c1/;sleep 1;done",
  "echo cend=$n/",
];

/** Fills [DATA_AT, DATA_AT + DATA_BYTES) of `path` with random MiBs (one random MiB, each copy stamped). */
function fillData(path: string): void {
  const block = randomBytes(MIB);
  const fd = openSync(path, "r+");
  try {
    for (let at = 0; at < DATA_BYTES; at += MIB) {
      block.writeUInt32LE(at / MIB, 0);
      writeSync(fd, block, 0, MIB, DATA_AT + at);
    }
  } finally {
    closeSync(fd);
  }
}

function md5(buf: Uint8Array): string {
  return createHash("md5").update(buf).digest("hex");
}

/** MD5 of the writer's records 1..n as the guest's `dd bs=512 skip=201 count=n` reads them. */
function recordsMd5(n: number): string {
  const h = createHash("md5");
  for (let i = 1; i <= n; i++) h.update(writerRecord(i));
  return h.digest("hex");
}

/**
 * Boot 3 (and boot 4 with `overlay`): live migration with a copied disk while the guest writes to it; `overlay`: the
 * disk is a copy-on-write overlay over a base image that must come out unchanged.
 */
export async function diskCopyMigrationChecks(bootTimeoutMs: number, overlay = false): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), overlay ? "kvt-disk-overlay-" : "kvt-disk-copy-"));
  const sourcePath = join(dir, "source.img");
  const targetPath = join(dir, "target.img");
  const basePath = join(dir, "base.img");
  // Where the host's data is: the disk itself, or (overlay) the base under two empty overlays.
  const dataPath = overlay ? basePath : sourcePath;
  makeImage(dataPath, COPY_DISK_BYTES, Buffer.alloc(SECTOR));
  fillData(dataPath);
  if (overlay) makeImage(sourcePath, COPY_DISK_BYTES, Buffer.alloc(0));
  makeImage(targetPath, COPY_DISK_BYTES, Buffer.alloc(0));
  const baseMd5 = overlay ? md5(readAt(basePath, 0, COPY_DISK_BYTES)) : "";
  const name = overlay ? "disk-overlay" : "disk-copy";
  const disk = { serial: "kvt-disk-copy", migrate: "copy" as const, ...(overlay ? { base: basePath } : {}) };
  let g: DemoGuest | undefined;
  let target: TargetPeer | undefined;
  try {
    const writing = await check(`${name}-writer-started`, async () => {
      g = bootDemo({ disks: [{ ...disk, path: sourcePath }] });
      const m = await g.console.waitFor(new RegExp(DEMO_BOOT_MARKER), bootTimeoutMs);
      const source = consolePeer(g);
      await converse(source, "echo ready", /^ready$/, 30_000);
      for (const line of WRITER_SCRIPT) await typeEchoed(source, `echo '${line}'>>/tmp/w.sh`);
      target = await spawnTarget({ disks: [{ ...disk, path: targetPath }] });
      for (const line of COPIER_SCRIPT) await typeEchoed(source, `echo '${line}'>>/tmp/c.sh`);
      typeLine(source, "sh /tmp/w.sh 2>/dev/null &");
      await g.console.waitFor(/^a5$/, 60_000);
      typeLine(source, "sh /tmp/c.sh 2>/dev/null &");
      await g.console.waitFor(/c1\/$/, 60_000);
      return (
        `marker ${Math.round(m.atMs)} ms; source.img ${COPY_DISK_BYTES / MIB} MiB (${DATA_BYTES / MIB} MiB data), ` +
        `target.img empty; 5 records acknowledged, the copier's first ${COPY_BYTES / MIB} MiB pass done`
      );
    });
    if (!writing || !g || !target) return;
    const source = g;
    const dest = target;
    const moved = await check(`${name}-migration-live`, async () => {
      const migration = new OutgoingMigration(source.vm, dest.destination, laneMigrationOptions(dest));
      const result = await migration.run();
      if (!result.ok) throw new Error(`the migration failed: ${result.failureReason}`);
      await within(dest.running, 60_000, "the guest running on the target");
      const onSource = acks(source.console.text);
      // An overlay sends what the guest wrote (records, the copier's 8 MiB, a few rounds of both), never the base.
      if (overlay && result.diskBytes >= DATA_BYTES)
        throw new Error(`the overlay sent ${result.diskBytes} disk bytes: the base's ${DATA_BYTES} went too`);
      return (
        `${overlay ? "overlay" : "copied disk"} ${COPY_DISK_BYTES / MIB} MiB: total ${result.totalSeconds.toFixed(1)} s, downtime ` +
        `${Math.round(result.downtimeMs ?? 0)} ms, ${result.iterations} passes, ${(result.diskBytes / MIB).toFixed(1)} MiB ` +
        `disk data of ${(result.bytesSent / MIB).toFixed(1)} MiB sent; ${onSource.length} records acknowledged on the ` +
        `source (last a${onSource.at(-1)})`
      );
    });
    if (!moved) return;
    await check(`${name}-guest-checksum`, async () => {
      const peer = targetConsolePeer(dest);
      const before = acks(source.console.text).length;
      await dest.console.waitFor(new RegExp(`^a${before + 5}$`), 60_000);
      await converse(peer, "touch /tmp/stop;echo stopping/", /^stopping\/$/, 30_000);
      const end = await dest.console.waitFor(/(^|[^c])end=\d+\/$/, 60_000);
      const copies = await dest.console.waitFor(/cend=\d+\/$/, 60_000);
      const n = Number(/end=(\d+)/.exec(end.line)?.[1]);
      const all = [...acks(source.console.text), ...acks(dest.console.text)];
      const last = Math.max(...all);
      if (!(n >= last)) throw new Error(`writer ended at ${n}, but a${last} was printed`);
      await converse(peer, "echo 3 >/proc/sys/vm/drop_caches;echo dropped/", /^dropped\/$/, 30_000);
      const sum = await converse(
        peer,
        `dd if=/dev/vda bs=512 skip=${WRITER_BASE_SECTOR + 1} count=${n} 2>/dev/null|md5sum`,
        /^[0-9a-f]{32}\s/,
        60_000,
      );
      const got = sum.line.slice(0, 32);
      const want = recordsMd5(n);
      if (got !== want) throw new Error(`the guest reads md5 ${got} over records 1..${n}, expected ${want}`);
      const copied = await converse(
        peer,
        `dd if=/dev/vda bs=1M skip=${COPY_TO / MIB} count=${COPY_BYTES / MIB} 2>/dev/null|md5sum`,
        /^[0-9a-f]{32}\s/,
        60_000,
      );
      const wantCopy = md5(readAt(dataPath, DATA_AT, COPY_BYTES));
      if (copied.line.slice(0, 32) !== wantCopy) {
        throw new Error(`the copier's region reads md5 ${copied.line.slice(0, 32)}, expected ${wantCopy}`);
      }
      const passes = /cend=(\d+)/.exec(copies.line)?.[1];
      return (
        `the guest's md5 of records 1..${n} after the move matches (${before} acknowledged on the source); its ` +
        `${COPY_BYTES / MIB} MiB copy (${passes} passes) reads back as the source data`
      );
    });
    await check(`${name}-writes-kept`, async () => {
      const peer = targetConsolePeer(dest);
      await converse(peer, "echo ready", /^ready$/, 30_000);
      peer.writeSerial("poweroff\n");
      const ev = await within(dest.shutdown, 60_000, "power-off on the target");
      if (ev.reason !== "guest-exit" || ev.code !== 0) throw new Error(`expected guest-exit 0, got ${ev.reason}`);
      await dest.stop();
      const all = [...acks(source.console.text), ...acks(dest.console.text)];
      const last = Math.max(...all);
      const lost: number[] = [];
      for (const i of all) {
        if (!readAt(targetPath, (WRITER_BASE_SECTOR + i) * SECTOR, SECTOR).equals(writerRecord(i))) lost.push(i);
      }
      if (lost.length > 0)
        throw new Error(`acknowledged records missing from target.img: ${lost.slice(0, 20).join(" ")}`);
      if (!readAt(targetPath, COPY_TO, COPY_BYTES).equals(readAt(dataPath, DATA_AT, COPY_BYTES))) {
        throw new Error("target.img's copier region differs from the data it copied");
      }
      const allocated = (statSync(targetPath).blocks * 512) / MIB;
      if (overlay) {
        const after = md5(readAt(basePath, 0, COPY_DISK_BYTES));
        if (after !== baseMd5) throw new Error(`base.img changed: md5 ${after}, ${baseMd5} before boot`);
        return (
          `all ${all.length} acknowledged records (1..${last}) in the target's overlay, the copier's region equal ` +
          `to the base's data; base.img md5 ${baseMd5} unchanged; the target's overlay allocates ` +
          `${allocated.toFixed(1)} of ${COPY_DISK_BYTES / MIB} MiB`
        );
      }
      const srcData = md5(readAt(sourcePath, DATA_AT, DATA_BYTES));
      const dstData = md5(readAt(targetPath, DATA_AT, DATA_BYTES));
      if (srcData !== dstData)
        throw new Error(`the ${DATA_BYTES / MIB} MiB data region differs: ${srcData} vs ${dstData}`);
      return (
        `all ${all.length} acknowledged records (1..${last}) in target.img; data region md5 ${srcData} on both, ` +
        `the copier's region equal to its source; ` +
        `target.img allocates ${allocated.toFixed(1)} of ${COPY_DISK_BYTES / MIB} MiB (holes stayed holes)`
      );
    });
  } finally {
    await target?.stop();
    g?.vm.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
