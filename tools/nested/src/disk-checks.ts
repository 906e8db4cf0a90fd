/**
 * The nested lane's virtio-blk checks: the demo image boots on our VMM with two raw image files in L1's
 * /tmp as `boot.disks`, and the guest's shell uses them through the console.
 *
 *   host (L1)                                          guest (L2, demo image, busybox)
 *   rw.img 64 MiB, sector 0 = known random bytes  -->  /dev/vda: size 131072 sectors, serial kvt-disk-0
 *   ro.img 1 MiB, read-only                       -->  /dev/vdb: ro = 1
 *                                                      md5sum of vda's sector 0 = the host's
 *                                                      echo $t | dd of=/dev/vda seek=100 conv=sync,fsync
 *                                                      dd of=/dev/vdb fails (the kernel or the device refuses)
 *   after `poweroff` (guest-exit 0): rw.img sector 100 starts with <token>; ro.img unchanged
 *
 *   boot 2 (diskMigrationChecks): a shell loop writes `r<i>` to sector 200+i (dd conv=fsync) and prints `a<i>` once
 *   dd returned; the guest moves to a second VMM process (migration-target.ts, the same disk file, as on a shared
 *   RWX volume) while it writes; after power-off on the target every acknowledged i is in the file
 *
 *   boot 3 (disk-copy-checks.ts): the same writer on a local disk (`migrate: "copy"`): the target has its own empty
 *   file, the stream copies the disk and the blocks written meanwhile; the guest checksums its records after the move
 *   boot 4 (disk-copy-checks.ts, overlay): the same on a containerDisk's copy-on-write overlay over a base image: only
 *   the written granules travel, and the base's md5 is unchanged after power-off
 *
 * Every command fits the UART's 64-byte receive FIFO (check-runner.ts MAX_CONSOLE_LINE). Answers end in "/": the
 * console matches partial lines too, so without an end mark "sz=" could match before "131072" arrived.
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEMO_BOOT_MARKER } from "@kvt/images";
import { OutgoingMigration } from "@kvt/migration";
import type { DeviceErrorEvent } from "@kvt/vmm";
import { type ConsolePeer, check, converse, typeLine, within } from "./check-runner.ts";
import { bootDemo, type DemoGuest } from "./demo-guest.ts";
import { diskCopyMigrationChecks } from "./disk-copy-checks.ts";
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

/** The read-write disk: 64 MiB = 131072 sectors of 512 bytes. */
export const DISK_BYTES = 64 * 2 ** 20;
/** The serial the guest must read back (at most 20 bytes). */
export const DISK_SERIAL = "kvt-disk-0";
/** Where the guest writes its pattern (in 512-byte sectors). */
export const GUEST_WRITE_SECTOR = 100;
const RO_DISK_BYTES = 2 ** 20;

/** Runs the disk group: one boot with a read-write and a read-only disk. */
export async function diskChecks(bootTimeoutMs: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "kvt-disk-"));
  const rwPath = join(dir, "rw.img");
  const roPath = join(dir, "ro.img");
  const token = randomBytes(6).toString("hex");
  // Sector 0: an ASCII header (readable in `od` when a check fails) and random bytes; the guest must hash it alike.
  const sector0 = Buffer.concat([Buffer.from(`kvt-host-${token}\n`), randomBytes(SECTOR)]).subarray(0, SECTOR);
  const sector0Md5 = createHash("md5").update(sector0).digest("hex");
  makeImage(rwPath, DISK_BYTES, sector0);
  const roSector0 = Buffer.from(`kvt-ro-${token}\n`.padEnd(SECTOR, "r"));
  makeImage(roPath, RO_DISK_BYTES, roSector0);
  const deviceErrors: DeviceErrorEvent[] = [];
  let g: DemoGuest | undefined;
  try {
    const booted = await check("disk-boot", async () => {
      g = bootDemo({
        disks: [
          { path: rwPath, serial: DISK_SERIAL },
          { path: roPath, readOnly: true, serial: "kvt-disk-ro" },
        ],
      });
      g.vm.on("device-error", (e) => deviceErrors.push(e));
      const m = await g.console.waitFor(new RegExp(DEMO_BOOT_MARKER), bootTimeoutMs);
      await converse(consolePeer(g), "echo ready", /^ready$/, 30_000);
      return `marker ${Math.round(m.atMs)} ms with 2 virtio-blk disks: ${m.line}`;
    });
    if (!booted || !g) return;
    const guest = g;
    const peer = consolePeer(guest);
    await check("disk-guest-sees-vda", async () => {
      const want = DISK_BYTES / SECTOR;
      const m = await converse(peer, "echo sz=$(cat /sys/block/vda/size)/", /^sz=\d*\/$/, 30_000);
      if (m.line !== `sz=${want}/`)
        throw new Error(`/sys/block/vda/size: ${m.line}, want ${want}; ${await pciLog(peer)}`);
      return `/dev/vda is ${want} sectors (64 MiB)`;
    });
    await check("disk-serial", async () => {
      const m = await converse(peer, "echo sn=$(cat /sys/block/vda/serial)/", /^sn=.*\/$/, 30_000);
      if (m.line !== `sn=${DISK_SERIAL}/`) throw new Error(`/sys/block/vda/serial: ${m.line}, want ${DISK_SERIAL}`);
      return `/sys/block/vda/serial = ${DISK_SERIAL}`;
    });
    await check("disk-read-host-pattern", async () => {
      const m = await converse(peer, "dd if=/dev/vda count=1 2>/dev/null|md5sum", /^[0-9a-f]{32}\s/, 30_000);
      const got = m.line.slice(0, 32);
      if (got !== sector0Md5) throw new Error(`sector 0 md5 ${got}, the host wrote ${sector0Md5}`);
      return `md5 of sector 0 ${got} (kvt-host-${token}...) as written by the host`;
    });
    const guestToken = `kvt-guest-${token}`;
    await check("disk-guest-write", async () => {
      // Two lines: the token in a shell variable first, each line within the UART's FIFO.
      await converse(peer, `t=${guestToken};echo t=$t`, new RegExp(`^t=${guestToken}$`), 30_000);
      const cmd = `echo $t|dd of=/dev/vda seek=${GUEST_WRITE_SECTOR} conv=sync,fsync;echo w=$?/`;
      const m = await converse(peer, cmd, /^w=\d+\/$/, 30_000);
      if (m.line !== "w=0/") throw new Error(`dd to /dev/vda exited ${m.line.slice(2, -1)}`);
      return `dd wrote ${guestToken} at sector ${GUEST_WRITE_SECTOR} with fsync (flush) and exited 0`;
    });
    await check("disk-guest-throughput", async () => {
      // O_DIRECT both ways (no guest page cache): 64 MiB read, 32 MiB written from 1 MiB on (sectors 0 and 100 kept),
      // timed by busybox `time` in the guest (its dd prints no rate). Each typed once: converse would type a slow dd
      // again, and the rerun's output would answer the next one.
      await converse(peer, "d=oflag=direct;echo d=$d/", /^d=oflag=direct\/$/, 30_000);
      const timed = async (cmd: string, mib: number): Promise<string> => {
        const from = guest.console.mark();
        typeLine(peer, cmd);
        await guest.console.waitFor(/^sys\s/, 120_000, from);
        const lines = guest.console.text.slice(from).split("\n");
        const real = lines.map((l) => /^real\s+(?:(\d+)m\s*)?([\d.]+)s/.exec(l)).find((m) => m !== null);
        if (!real) throw new Error(`no time for ${cmd}: ${JSON.stringify(lines.slice(-6))}`);
        if (!lines.some((l) => l.startsWith(`${mib}+0 records out`))) {
          throw new Error(`${cmd} did not copy ${mib} MiB: ${JSON.stringify(lines.slice(-6))}`);
        }
        const seconds = Number(real[1] ?? 0) * 60 + Number(real[2]);
        return `${mib} MiB in ${seconds.toFixed(2)} s (${(mib / seconds).toFixed(1)} MiB/s)`;
      };
      const rd = await timed("time dd if=/dev/vda of=/dev/null bs=1M iflag=direct", 64);
      const wr = await timed("time dd</dev/zero of=/dev/vda bs=1M seek=1 count=32 $d", 32);
      return `guest dd, 1 MiB O_DIRECT: read ${rd}, write ${wr}`;
    });
    await check("disk-read-only-refuses", async () => {
      const ro = await converse(peer, "echo ro=$(cat /sys/block/vdb/ro)/", /^ro=.*\/$/, 30_000);
      if (ro.line !== "ro=1/") throw new Error(`/sys/block/vdb/ro: ${ro.line}, want 1 (VIRTIO_BLK_F_RO)`);
      const from = guest.console.mark();
      const m = await converse(peer, "echo x|dd of=/dev/vdb conv=sync,fsync;echo w=$?/", /^w=\d+\/$/, 30_000);
      if (m.line === "w=0/") throw new Error("dd to the read-only /dev/vdb succeeded");
      const why = guest.console.text
        .slice(from)
        .split("\n")
        .find((l) => /dd: /.test(l));
      return `/sys/block/vdb/ro = 1; dd exited ${m.line.slice(2, -1)}: ${why ?? "(no message)"}`;
    });
    await check("disk-host-reads-guest-write", async () => {
      await converse(peer, "echo ready", /^ready$/, 30_000);
      guest.vm.writeSerial("poweroff\n");
      const ev = await within(guest.shutdown, 60_000, "power-off");
      if (ev.reason !== "guest-exit" || ev.code !== 0) throw new Error(`expected guest-exit 0, got ${ev.reason}`);
      const stats = guest.vm.stats();
      guest.vm.stop();
      const at = GUEST_WRITE_SECTOR * SECTOR;
      const got = readAt(rwPath, at, SECTOR);
      const want = Buffer.alloc(SECTOR);
      want.write(`${guestToken}\n`);
      if (!got.equals(want)) {
        throw new Error(`rw.img sector ${GUEST_WRITE_SECTOR}: ${JSON.stringify(got.subarray(0, 40).toString())}`);
      }
      if (!readAt(rwPath, 0, SECTOR).equals(sector0)) throw new Error("rw.img sector 0 changed");
      if (!readFileSync(roPath).subarray(0, SECTOR).equals(roSector0)) throw new Error("ro.img changed");
      if (deviceErrors.length > 0) {
        throw new Error(`device errors: ${deviceErrors.map((e) => `${e.device}: ${e.reason}`).join(", ")}`);
      }
      return (
        `after poweroff the host reads ${guestToken} at sector ${GUEST_WRITE_SECTOR}; ro.img unchanged; ` +
        `${stats.diskRequests} requests, ${stats.diskReadBytes} B read, ${stats.diskWriteBytes} B written, ` +
        `${stats.diskErrors} errors, ${stats.diskBroken} broken`
      );
    });
  } finally {
    g?.vm.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  await diskMigrationChecks(bootTimeoutMs);
  await diskCopyMigrationChecks(bootTimeoutMs);
  await diskCopyMigrationChecks(bootTimeoutMs, true);
}

/** Boot 2: live migration while the guest writes to a disk both VMM processes open (a shared volume). */
async function diskMigrationChecks(bootTimeoutMs: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "kvt-disk-mig-"));
  const path = join(dir, "shared.img");
  makeImage(path, DISK_BYTES, Buffer.alloc(SECTOR));
  const options = { disks: [{ path, serial: "kvt-disk-shared" }] };
  let g: DemoGuest | undefined;
  let target: TargetPeer | undefined;
  try {
    const writing = await check("disk-migration-writer-started", async () => {
      g = bootDemo(options);
      const m = await g.console.waitFor(new RegExp(DEMO_BOOT_MARKER), bootTimeoutMs);
      const source = consolePeer(g);
      await converse(source, "echo ready", /^ready$/, 30_000);
      for (const line of WRITER_SCRIPT) await typeEchoed(source, `echo '${line}'>>/tmp/w.sh`);
      // The target process first (its Node start is slow under TCG), so the guest writes right up to the move.
      target = await spawnTarget(options);
      typeLine(source, "sh /tmp/w.sh 2>/dev/null &");
      await g.console.waitFor(/^a5$/, 60_000);
      return `marker ${Math.round(m.atMs)} ms; the writer acknowledged 5 records on the source`;
    });
    if (!writing || !g || !target) return;
    const source = g;
    const dest = target;
    const moved = await check("disk-migration-live", async () => {
      const migration = new OutgoingMigration(source.vm, dest.destination, laneMigrationOptions(dest));
      const result = await migration.run();
      if (!result.ok) throw new Error(`the migration failed: ${result.failureReason}`);
      await within(dest.running, 60_000, "the guest running on the target");
      const onSource = acks(source.console.text);
      return (
        `downtime ${Math.round(result.downtimeMs ?? 0)} ms, total ${result.totalSeconds.toFixed(1)} s, ` +
        `${result.iterations} passes; ${onSource.length} records acknowledged on the source (last a${onSource.at(-1)})`
      );
    });
    if (!moved) return;
    await check("disk-migration-writes-kept", async () => {
      const peer = targetConsolePeer(dest);
      const before = acks(source.console.text).length;
      await dest.console.waitFor(new RegExp(`^a${before + 5}$`), 60_000);
      await converse(peer, "touch /tmp/stop;echo stopping/", /^stopping\/$/, 30_000);
      // The background job's last line may follow a prompt on the same line.
      const end = await dest.console.waitFor(/end=\d+\/$/, 60_000);
      await converse(peer, "echo ready", /^ready$/, 30_000);
      peer.writeSerial("poweroff\n");
      const ev = await within(dest.shutdown, 60_000, "power-off on the target");
      if (ev.reason !== "guest-exit" || ev.code !== 0) throw new Error(`expected guest-exit 0, got ${ev.reason}`);
      await dest.stop();
      const all = [...acks(source.console.text), ...acks(dest.console.text)];
      if (all.length === before) throw new Error("no record acknowledged on the target");
      const last = Math.max(...all);
      const lost: number[] = [];
      for (let i = 1; i <= last; i++) {
        if (!readAt(path, (WRITER_BASE_SECTOR + i) * SECTOR, SECTOR).equals(writerRecord(i))) lost.push(i);
      }
      const missingAcks = Array.from({ length: last }, (_, k) => k + 1).filter((i) => !all.includes(i));
      if (lost.length > 0)
        throw new Error(`acknowledged records missing from the file: ${lost.slice(0, 20).join(" ")}`);
      const garbled = missingAcks.length ? `; ack lines garbled on the console: ${missingAcks.join(" ")}` : "";
      return (
        `records 1..${last} all in the file after power-off on the target (${before} acknowledged on the source, ` +
        `${all.length - before} on the target, writer ${/end=\d+/.exec(end.line)?.[0] ?? end.line}${garbled})`
      );
    });
  } finally {
    await target?.stop();
    g?.vm.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The guest's view of PCI and virtio, for a failure message. */
async function pciLog(peer: ConsolePeer): Promise<string> {
  const from = peer.console.mark();
  try {
    await converse(peer, "dmesg|grep -i -e virtio -e pci|tail -n 15;echo end", /^end$/, 30_000);
  } catch {
    // The message of the failing check is what matters; the log is a bonus.
  }
  return JSON.stringify(peer.console.text.slice(from).slice(-1500));
}
