/**
 * `npm run bench -- disk`'s live migration with a non-shared disk: the demo guest (busybox initramfs, 256 MiB, 1 vCPU)
 * with one local disk full of data, moved between two processes on loopback:
 *   ours: boot.disks migrate "copy" (the disk travels in our migration stream with dirty-block tracking) into a
 *         target process (disk-migration-target.ts) whose disk file starts empty;
 *   QEMU: -accel kvm, the same disk as virtio-blk (cache writeback), QMP `migrate` with the `block` capability
 *         (QEMU's block migration: the disk in the migration stream) into `-incoming tcp:` with an empty disk.
 * Both report total time and downtime; the target's disk is checked against the source's afterwards.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { closeSync, ftruncateSync, openSync, readSync, rmSync, writeSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { OutgoingMigration } from "@kvt/migration";
import { createLogger } from "@kvt/observability";
import { Vm, type VmOptions } from "@kvt/vmm";
import type { BootSource } from "../src/machine/machine.ts";
import { diskArgs } from "../src/machine/qemu/qemu-args.ts";
import { QmpClient } from "../src/machine/qemu/qmp.ts";

const MARKER = /KVT_DEMO_LINUX_BOOTED/;
const MEMORY = 256 * 2 ** 20;
const TARGET = new URL("./disk-migration-target.ts", import.meta.url).pathname;

/** What the JSON line's migrationWithDisk says. */
export interface DiskMigrationFigures {
  readonly diskBytes: number;
  readonly totalSeconds: number;
  readonly downtimeMs: number;
  readonly qemuTotalSeconds: number;
  readonly qemuDowntimeMs: number;
}

/** Fills `path` with `bytes` of non-zero data (one MiB pattern, each MiB stamped). */
function fill(path: string, bytes: number): void {
  const block = Buffer.alloc(2 ** 20);
  for (let i = 0; i < block.length; i += 4) block.writeUInt32LE((i * 2246822519 + 7) >>> 0, i);
  const fd = openSync(path, "w");
  try {
    for (let at = 0; at < bytes; at += block.length) {
      block.writeUInt32LE(at / block.length, 0);
      writeSync(fd, block, 0, block.length, at);
    }
  } finally {
    closeSync(fd);
  }
}

function sparse(path: string, bytes: number): void {
  const fd = openSync(path, "w");
  try {
    ftruncateSync(fd, bytes);
  } finally {
    closeSync(fd);
  }
}

/** MD5 of 64 MiB samples spread over the file (a whole-file hash would double the bench's time in L1). */
function sampleMd5(path: string, bytes: number): string {
  const h = createHash("md5");
  const buf = Buffer.alloc(2 ** 20);
  const fd = openSync(path, "r");
  try {
    for (let k = 0; k < 64; k++) {
      const at = Math.floor(((bytes - buf.length) * (k / 63)) / buf.length) * buf.length;
      h.update(buf.subarray(0, readSync(fd, buf, 0, buf.length, at)));
    }
  } finally {
    closeSync(fd);
  }
  return h.digest("hex");
}

async function until(cond: () => boolean, what: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as { port: number }).port;
  await new Promise((r) => server.close(r));
  return port;
}

function vmOptions(boot: BootSource, disk: string): VmOptions {
  return {
    memoryBytes: MEMORY,
    vcpus: 1,
    boot: {
      kind: "linux",
      kernelPath: boot.uncompressedKernelPath ?? boot.kernelPath,
      ...(boot.initrdPath ? { initrdPath: boot.initrdPath } : {}),
      cmdline: "console=ttyS0 quiet panic=-1",
      disks: [{ path: disk, serial: "local", migrate: "copy" }],
    },
  };
}

async function ours(boot: BootSource, dir: string, bytes: number): Promise<{ total: number; down: number }> {
  const src = join(dir, "mig-src.img");
  const dst = join(dir, "mig-dst.img");
  fill(src, bytes);
  sparse(dst, bytes);
  const target = spawn(process.execPath, [TARGET, JSON.stringify(vmOptions(boot, dst))], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const said: Record<string, unknown>[] = [];
  createInterface({ input: target.stdout }).on("line", (l) => said.push(JSON.parse(l) as Record<string, unknown>));
  let text = "";
  const vm = Vm.create(vmOptions(boot, src));
  vm.on("serial-output", (c) => {
    text += Buffer.from(c).toString("latin1");
  });
  try {
    vm.start();
    await until(() => MARKER.test(text), "the demo guest's boot marker (ours)", 300_000);
    await until(() => said.some((m) => m.kind === "listening"), "the target process", 240_000);
    const destination = said.find((m) => m.kind === "listening")?.destination as {
      host: string;
      port: number;
      secret: string;
    };
    const result = await new OutgoingMigration(vm, destination, {
      bandwidthBytesPerSec: 0,
      maxDowntimeMs: 300,
      allowAutoConverge: true,
      completionTimeoutSec: 900,
      progressTimeoutSec: 300,
      ioTimeoutMs: 240_000,
    }).run();
    if (!result.ok) throw new Error(`our migration failed: ${result.failureReason}`);
    await until(() => said.some((m) => m.kind === "running" || m.kind === "failed"), "the target running", 60_000);
    if (sampleMd5(src, bytes) !== sampleMd5(dst, bytes)) throw new Error("ours: the target's disk differs");
    return { total: result.totalSeconds, down: result.downtimeMs ?? 0 };
  } finally {
    if (vm.state !== "stopped") vm.stop();
    target.stdin?.write("stop\n");
    rmSync(src, { force: true });
    rmSync(dst, { force: true });
  }
}

function qemuProcess(boot: BootSource, disk: string, qmp: string, extra: string[], kvm: boolean): ChildProcess {
  const args = [
    ...(kvm ? ["-accel", "kvm", "-cpu", "host"] : ["-accel", "tcg"]),
    ...["-m", String(MEMORY / 2 ** 20), "-smp", "1", "-nographic", "-nodefaults", "-serial", "stdio"],
    ...["-kernel", boot.kernelPath, "-append", "console=ttyS0 quiet panic=-1"],
    ...(boot.initrdPath ? ["-initrd", boot.initrdPath] : []),
    ...["-qmp", `unix:${qmp},server=on,wait=off`],
    ...diskArgs(
      { name: "local", path: disk, readOnly: false, kind: "emptyDisk", shared: false, cache: "writeback" },
      0,
    ),
    ...extra,
  ];
  return spawn("qemu-system-x86_64", args, { stdio: ["ignore", "pipe", "pipe"] });
}

interface MigrateInfo {
  status?: string;
  "total-time"?: number;
  downtime?: number;
  "error-desc"?: string;
}

async function qemu(
  boot: BootSource,
  dir: string,
  bytes: number,
  kvm: boolean,
): Promise<{ total: number; down: number }> {
  const src = join(dir, "qmig-src.img");
  const dst = join(dir, "qmig-dst.img");
  fill(src, bytes);
  sparse(dst, bytes);
  const port = await freePort();
  const log = createLogger({ component: "disk-bench", level: "silent" });
  const target = qemuProcess(boot, dst, join(dir, "qt.qmp"), ["-incoming", `tcp:127.0.0.1:${port}`], kvm);
  const source = qemuProcess(boot, src, join(dir, "qs.qmp"), [], kvm);
  let text = "";
  source.stdout?.on("data", (c: Buffer) => {
    text += c.toString("latin1");
  });
  const clients: QmpClient[] = [];
  try {
    await until(() => MARKER.test(text), "the demo guest's boot marker (QEMU)", 300_000);
    const qmp = await QmpClient.connect(join(dir, "qs.qmp"), log);
    clients.push(await QmpClient.connect(join(dir, "qt.qmp"), log));
    clients.push(qmp);
    await qmp.execute("migrate-set-capabilities", { capabilities: [{ capability: "block", state: true }] });
    await qmp.execute("migrate-set-parameters", { "downtime-limit": 300, "max-bandwidth": 10 * 1024 ** 3 });
    await qmp.execute("migrate", { uri: `tcp:127.0.0.1:${port}` });
    let info: MigrateInfo = {};
    const deadline = Date.now() + 900_000;
    for (;;) {
      await new Promise((r) => setTimeout(r, 200));
      info = await qmp.execute<MigrateInfo>("query-migrate");
      if (info.status === "completed") break;
      if (info.status === "failed" || info.status === "cancelled" || Date.now() > deadline)
        throw new Error(`QEMU's block migration ${info.status}: ${info["error-desc"] ?? ""}`);
    }
    if (sampleMd5(src, bytes) !== sampleMd5(dst, bytes)) throw new Error("QEMU: the target's disk differs");
    return { total: (info["total-time"] ?? 0) / 1000, down: info.downtime ?? 0 };
  } finally {
    for (const c of clients) c.close();
    source.kill("SIGKILL");
    target.kill("SIGKILL");
    rmSync(src, { force: true });
    rmSync(dst, { force: true });
  }
}

/** Both migrations of a guest with a `bytes` non-shared disk. */
export async function migrationWithDisk(
  boot: BootSource,
  dir: string,
  bytes: number,
  kvm: boolean,
): Promise<DiskMigrationFigures> {
  const o = await ours(boot, dir, bytes);
  const q = await qemu(boot, dir, bytes, kvm);
  const r = (x: number): number => Math.round(x * 1000) / 1000;
  return {
    diskBytes: bytes,
    totalSeconds: r(o.total),
    downtimeMs: r(o.down),
    qemuTotalSeconds: r(q.total),
    qemuDowntimeMs: r(q.down),
  };
}
