/**
 * `npm run bench -- disk`'s live migration with a non-shared disk: the demo guest (busybox initramfs, 256 MiB, 1 vCPU)
 * with one local disk full of data, moved between two processes on loopback:
 *   ours: boot.disks migrate "copy" (the disk travels in our migration stream with dirty-block tracking) into a
 *         target process (disk-migration-target.ts) whose disk file starts empty; run twice: in plaintext (as the
 *         QEMU side below) and over TLS (our default: TLS 1.3, pinned per-migration certificates, docs/decisions/0013);
 *   QEMU: -accel kvm, the same disk as virtio-blk (cache writeback), QMP `migrate` with the `block` capability
 *         (QEMU's block migration: the disk in the migration stream) into `-incoming tcp:` with an empty disk; run
 *         twice: plaintext TCP, and TLS (tls-creds-x509 from @kvt/certs, both ends verified).
 * Like with like: ours in plaintext against QEMU's plaintext block migration (totalSeconds/downtimeMs are that run,
 * goalMet compares it with qemuTotalSeconds), ours encrypted against QEMU over TLS (encryptedGoalMet).
 * Each reports total time and downtime (ours also the bulk pass and the rounds); the target's disk is checked against
 * the source's afterwards.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { closeSync, ftruncateSync, mkdirSync, openSync, readSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { generateCa, issueCertificate } from "@kvt/certs";
import { type MigrationTarget, OutgoingMigration } from "@kvt/migration";
import { createLogger } from "@kvt/observability";
import { freePort } from "@kvt/runtime";
import { Vm, type VmOptions } from "@kvt/vmm";
import type { BootSource } from "../src/machine/machine.ts";
import { migrationTlsPair } from "../src/machine/migration-tls.test-util.ts";
import { diskArgs } from "../src/machine/qemu/qemu-args.ts";
import { QmpClient } from "../src/machine/qemu/qmp.ts";

const MARKER = /KVT_DEMO_LINUX_BOOTED/;
const MEMORY = 256 * 2 ** 20;
const TARGET = new URL("./disk-migration-target.ts", import.meta.url).pathname;

/** What the JSON line's migrationWithDisk says (ours in plaintext unless named encrypted). */
export interface DiskMigrationFigures {
  readonly diskBytes: number;
  readonly totalSeconds: number;
  readonly downtimeMs: number;
  /** null (with qemuError) when QEMU's block migration failed: ours stand on their own. */
  readonly qemuTotalSeconds: number | null;
  readonly qemuDowntimeMs: number | null;
  readonly qemuError?: string;
  /** Like with like: ours in plaintext beat QEMU's plaintext block migration (the issue's goal); null: no QEMU figure. */
  readonly goalMet: boolean | null;
  readonly comparison: "plaintext vs plaintext";
  /** Our default, the stream encrypted, against QEMU's block migration over TLS (tls-creds-x509, both ends verified;
   *  null with qemuTlsError when it failed): encrypted like with like. */
  readonly encryptedTotalSeconds: number;
  readonly encryptedDowntimeMs: number;
  readonly qemuTlsTotalSeconds: number | null;
  readonly qemuTlsDowntimeMs: number | null;
  readonly qemuTlsError?: string;
  readonly encryptedGoalMet: boolean | null;
  /** Where our time went, per run: the bulk pass (memory, then the disk), the target's receive time, rounds. */
  readonly phases: { readonly plain: OurPhases; readonly encrypted: OurPhases };
}

/** One of our runs, in detail. */
interface OurPhases {
  readonly bulkSeconds: number;
  readonly receiveSeconds: number;
  readonly iterations: number;
  readonly bytesSent: number;
  readonly diskBytes: number;
}

interface OurRun {
  readonly total: number;
  readonly down: number;
  readonly phases: OurPhases;
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

async function ours(boot: BootSource, dir: string, bytes: number, encrypt: boolean): Promise<OurRun> {
  const src = join(dir, "mig-src.img");
  const dst = join(dir, "mig-dst.img");
  fill(src, bytes);
  sparse(dst, bytes);
  const pair = encrypt ? await migrationTlsPair() : undefined; // as the two handlers mint them
  const targetTls = pair ? { tls: pair.target, sourceCertificate: pair.source.certificate } : { tls: false };
  const target = spawn(process.execPath, [TARGET, JSON.stringify(vmOptions(boot, dst)), JSON.stringify(targetTls)], {
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
    const destination = said.find((m) => m.kind === "listening")?.destination as MigrationTarget;
    const t0 = performance.now();
    let bulkSeconds = 0;
    const result = await new OutgoingMigration(vm, destination, {
      tls: pair?.source ?? false,
      onProgress: (p) => {
        if (p.iteration === 1) bulkSeconds = (performance.now() - t0) / 1000;
      },
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
    const running = said.find((m) => m.kind === "running");
    return {
      total: result.totalSeconds,
      down: result.downtimeMs ?? 0,
      phases: {
        bulkSeconds: Math.round(bulkSeconds * 1000) / 1000,
        receiveSeconds: Math.round(Number(running?.receiveSeconds ?? 0) * 1000) / 1000,
        iterations: result.iterations,
        bytesSent: result.bytesSent,
        diskBytes: result.diskBytes,
      },
    };
  } finally {
    if (vm.state !== "stopped") vm.stop();
    target.stdin?.write("stop\n");
    // Its disk's space (L1's tmpfs) is freed when the target exits, not at the rm: the next run needs it.
    if (target.exitCode === null && target.signalCode === null) {
      await Promise.race([new Promise((r) => target.once("exit", r)), new Promise((r) => setTimeout(r, 30_000))]);
    }
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

/** QEMU's TLS credentials (tls-creds-x509 directories) for a mutually authenticated migration on 127.0.0.1. */
async function qemuTlsDirs(dir: string): Promise<{ server: string; client: string }> {
  const ca = await generateCa("disk-bench-ca", 1);
  const names = { dnsNames: ["localhost"], ipAddresses: ["127.0.0.1"], validityDays: 1 };
  const server = await issueCertificate(ca, { ...names, usage: "server" });
  const client = await issueCertificate(ca, { ...names, usage: "client" });
  const out = { server: join(dir, "qtls-server"), client: join(dir, "qtls-client") };
  for (const [d, role, cert] of [
    [out.server, "server", server],
    [out.client, "client", client],
  ] as const) {
    mkdirSync(d, { recursive: true });
    writeFileSync(join(d, "ca-cert.pem"), ca.certPem);
    writeFileSync(join(d, `${role}-cert.pem`), cert.certPem);
    writeFileSync(join(d, `${role}-key.pem`), cert.keyPem, { mode: 0o600 });
  }
  return out;
}

/** The source and the (incoming) target QEMU of a block migration; with `creds`, the target waits for its TLS setup. */
function qemuPair(
  boot: BootSource,
  dir: string,
  o: { src: string; dst: string; port: number; kvm: boolean; creds?: { server: string; client: string } },
): { target: ChildProcess; source: ChildProcess } {
  const tlsObject = (d: string, endpoint: string): string[] => [
    "-object",
    `tls-creds-x509,id=tls0,dir=${d},endpoint=${endpoint},verify-peer=on`,
  ];
  const incoming = o.creds
    ? [...tlsObject(o.creds.server, "server"), "-incoming", "defer"]
    : ["-incoming", `tcp:127.0.0.1:${o.port}`];
  return {
    target: qemuProcess(boot, o.dst, join(dir, "qt.qmp"), incoming, o.kvm),
    source: qemuProcess(boot, o.src, join(dir, "qs.qmp"), o.creds ? tlsObject(o.creds.client, "client") : [], o.kvm),
  };
}

/** QEMU's block migration of the disk, in plaintext or over TLS (tls-creds-x509, both ends verified). */
async function qemu(
  boot: BootSource,
  dir: string,
  bytes: number,
  kvm: boolean,
  tls = false,
): Promise<{ total: number; down: number }> {
  const src = join(dir, "qmig-src.img");
  const dst = join(dir, "qmig-dst.img");
  fill(src, bytes);
  sparse(dst, bytes);
  const port = await freePort();
  const log = createLogger({ component: "disk-bench", level: "silent" });
  const creds = tls ? await qemuTlsDirs(dir) : undefined;
  const { target, source } = qemuPair(boot, dir, { src, dst, port, kvm, creds });
  let text = "";
  source.stdout?.on("data", (c: Buffer) => {
    text += c.toString("latin1");
  });
  let targetSaid = ""; // read, so that a full pipe never stalls it; named in an error
  for (const s of [target.stdout, target.stderr]) {
    s?.on("data", (c: Buffer) => {
      targetSaid = (targetSaid + c.toString("latin1")).slice(-400);
    });
  }
  const clients: QmpClient[] = [];
  try {
    await until(() => MARKER.test(text), "the demo guest's boot marker (QEMU)", 300_000);
    const qmp = await QmpClient.connect(join(dir, "qs.qmp"), log);
    const targetQmp = await QmpClient.connect(join(dir, "qt.qmp"), log);
    clients.push(targetQmp, qmp);
    if (creds) {
      await targetQmp.execute("migrate-set-parameters", { "tls-creds": "tls0" });
      await targetQmp.execute("migrate-incoming", { uri: `tcp:127.0.0.1:${port}` });
      await qmp.execute("migrate-set-parameters", { "tls-creds": "tls0", "tls-hostname": "127.0.0.1" });
    }
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
        throw new Error(
          `QEMU's block migration ${info.status}: ${info["error-desc"] ?? ""} (target exit ${target.exitCode ?? target.signalCode ?? "none"}: ${JSON.stringify(targetSaid)})`,
        );
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
  const plain = await ours(boot, dir, bytes, false);
  const sealed = await ours(boot, dir, bytes, true);
  let q: { total: number; down: number } | undefined;
  let qemuError: string | undefined;
  try {
    q = await qemu(boot, dir, bytes, kvm);
  } catch (err) {
    qemuError = (err as Error).message;
  }
  let qt: { total: number; down: number } | undefined;
  let qemuTlsError: string | undefined;
  try {
    qt = await qemu(boot, dir, bytes, kvm, true);
  } catch (err) {
    qemuTlsError = (err as Error).message;
  }
  const r = (x: number): number => Math.round(x * 1000) / 1000;
  return {
    diskBytes: bytes,
    totalSeconds: r(plain.total),
    downtimeMs: r(plain.down),
    qemuTotalSeconds: q ? r(q.total) : null,
    qemuDowntimeMs: q ? r(q.down) : null,
    ...(qemuError ? { qemuError } : {}),
    goalMet: q ? plain.total < q.total : null,
    comparison: "plaintext vs plaintext",
    encryptedTotalSeconds: r(sealed.total),
    encryptedDowntimeMs: r(sealed.down),
    qemuTlsTotalSeconds: qt ? r(qt.total) : null,
    qemuTlsDowntimeMs: qt ? r(qt.down) : null,
    ...(qemuTlsError ? { qemuTlsError } : {}),
    encryptedGoalMet: qt ? sealed.total < qt.total : null,
    phases: { plain: plain.phases, encrypted: sealed.phases },
  };
}
