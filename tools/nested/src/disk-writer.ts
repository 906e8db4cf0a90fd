/**
 * What the nested lane's disk migration checks share (disk-checks.ts: a shared disk; disk-copy-checks.ts: a copied
 * one): image files on the L1 host, and a guest shell loop that writes numbered records with fsync while the guest
 * moves.
 *
 *   writer (typed into /tmp/w.sh):  i = 1, 2, ...: `echo r<i> | dd of=/dev/vda seek=200+i conv=sync,fsync`
 *                                   prints a<i> once dd returned 0 (the write and its FLUSH were acknowledged)
 *                                   stops when /tmp/stop exists, printing end=<i>/
 */
import { closeSync, ftruncateSync, openSync, readSync, writeFileSync } from "node:fs";
import { type ConsolePeer, typeLine } from "./check-runner.ts";
import type { DemoGuest } from "./demo-guest.ts";
import type { TargetPeer } from "./migration-peer.ts";

/** virtio-blk's sector. */
export const SECTOR = 512;

/** Reads `length` bytes at `offset` of a file. */
export function readAt(path: string, offset: number, length: number): Buffer {
  const fd = openSync(path, "r");
  try {
    const buf = Buffer.alloc(length);
    const n = readSync(fd, buf, 0, length, offset);
    return buf.subarray(0, n);
  } finally {
    closeSync(fd);
  }
}

/** A fresh sparse image file of `bytes` whose first sector is `sector0`. */
export function makeImage(path: string, bytes: number, sector0: Uint8Array): void {
  writeFileSync(path, sector0);
  const fd = openSync(path, "r+");
  try {
    ftruncateSync(fd, bytes);
  } finally {
    closeSync(fd);
  }
}

/** First sector of the migration writer's records: record i goes to sector WRITER_BASE_SECTOR + i. */
export const WRITER_BASE_SECTOR = 200;
/**
 * The writer, typed line by line into /tmp/w.sh (each `echo '<line>'>>/tmp/w.sh` within the UART's FIFO). It runs
 * until /tmp/stop exists and ends with `end=<i>/`; `a<i>` means dd (with fsync: a virtio-blk FLUSH) returned 0.
 */
export const WRITER_SCRIPT = [
  "f=conv=sync,fsync;i=0",
  "while [ ! -f /tmp/stop ];do i=$((i+1))",
  `echo r$i|dd of=/dev/vda seek=$((${WRITER_BASE_SECTOR}+i)) $f`,
  "[ $? = 0 ]&&echo a$i;usleep 20000;done",
  "echo end=$i/",
];

/** The sector record i of the writer leaves on the disk: `r<i>\n`, zero-padded. */
export function writerRecord(i: number): Buffer {
  const want = Buffer.alloc(SECTOR);
  want.write(`r${i}\n`);
  return want;
}

/** Every `a<i>` line of a console: the writes the guest saw acknowledged. */
export function acks(text: string): number[] {
  return [...text.matchAll(/^a(\d+)$/gm)].map((m) => Number(m[1]));
}

/** Types `line` and waits for the shell to echo it back (so the next line cannot overflow the UART's FIFO). */
export async function typeEchoed(peer: ConsolePeer, line: string): Promise<void> {
  const from = peer.console.mark();
  typeLine(peer, line);
  const escaped = line.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  await peer.console.waitFor(new RegExp(escaped), 30_000, from);
}

/** The console of a guest on the source VMM. */
export const consolePeer = (g: DemoGuest): ConsolePeer => ({
  console: g.console,
  writeSerial: (t) => g.vm.writeSerial(t),
});

/** The console of a guest that moved to a target VMM process. */
export const targetConsolePeer = (t: TargetPeer): ConsolePeer => ({
  console: t.console,
  writeSerial: (s) => t.writeSerial(s),
});
