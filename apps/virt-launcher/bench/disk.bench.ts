/**
 * `npm run bench -- disk`: fio inside the guest (local/debian-cloud: Debian's fio, direct I/O on /dev/vdb, libaio) on
 * our VMM and on QEMU (-accel kvm) with the same image, the same cache mode and the same host file, side by side in
 * one run (in the nested lane's L1 where this host's KVM cannot run Linux), plus fio on that host file itself.
 *
 *   guest disks: vda = the image's root filesystem under a copy-on-write layer (ours: our overlay; QEMU: qcow2)
 *                vdb = data.img, the measured disk (raw, the host's page cache on both: our VMM's only mode, QEMU
 *                      cache=writeback: cache.direct=off, write-cache=on; guest flushes reach the file on both)
 *                vdc = the job script, run as init (`init=/bin/sh -- /dev/vdc`): fio per job, a python3 line prints
 *                      `KVT_FIO <job> <readBytesPerSec> <readIops> <writeBytesPerSec> <writeIops> <rLatNs> <wLatNs>`
 *   jobs: 1 MiB sequential read and write, 4 KiB random read and write, each at queue depth 1 and 32
 *
 * Headline figures are queue depth 32 (QD1 under "qd1"); randRead4kQd1LatencyUs is fio's mean completion latency.
 * MBps = 10^6 bytes/s. Flags: --runtime S (per job, default 5), --rounds N (default 2: each side's guest runs N
 * times, the order alternating, fio on the host file between the two guests of each round, and each figure is
 * the median), --data-mib N (default 512), --migration-mib N
 * (default 1024; 0 skips it): the live migration of the demo guest with an N MiB non-shared disk full of data, ours
 * (copied in our stream, plaintext and encrypted) against QEMU's block migration, plaintext and over TLS
 * (disk-migration.ts; like with like: totalSeconds is ours in plaintext against qemuTotalSeconds, goalMet; ours
 * encrypted against QEMU over TLS, encryptedGoalMet); null where KVM cannot run Linux. --migration-only skips the fio jobs (ours, qemu and host are then null): e.g.
 * `npm run bench -- disk --migration-only --migration-mib 256` for a quick look at the migration alone.
 * Last line: {"area":"disk","lane":..,"ours":{..},"qemu":{..},"host":{..},"migrationWithDisk":null,...}
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { closeSync, ftruncateSync, mkdtempSync, openSync, rmSync, statSync, writeFileSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { ensureHostTools, HostToolError } from "@kvt/runtime";
import { benchLane, kvmRunsLinux, Vm } from "@kvt/vmm";
import { diskArgs } from "../src/machine/qemu/qemu-args.ts";
import { imageStoreResolver } from "../src/vmi/image-store.ts";
import { writeQcow2Overlay } from "../src/volumes/qcow2-overlay.ts";
import { type DiskMigrationFigures, migrationWithDisk } from "./disk-migration.ts";

const { values } = parseArgs({
  options: {
    runtime: { type: "string", default: "5" },
    "data-mib": { type: "string", default: "512" },
    "migration-mib": { type: "string", default: "1024" },
    "migration-only": { type: "boolean", default: false },
    rounds: { type: "string", default: "2" },
    host: { type: "boolean", default: false },
    nested: { type: "boolean", default: false },
  },
});
const RUNTIME_S = Math.max(1, Number(values.runtime) || 5);
const ROUNDS = Math.max(1, Math.floor(Number(values.rounds) || 2));
const DATA_BYTES = Math.max(64, Number(values["data-mib"]) || 512) * 2 ** 20;
const MIGRATION_BYTES = Math.max(0, Number(values["migration-mib"] ?? 1024)) * 2 ** 20;
const FIO = !values["migration-only"];
const root = new URL("../../../", import.meta.url).pathname;
const IMAGE = "local/debian-cloud:latest";
const GUEST_MEMORY = 1024 * 2 ** 20;
// L1 has one CPU: one vCPU each there, so neither VMM runs more threads than L1 can schedule.
const VCPUS = benchLane() === "nested" ? 1 : 2;
const BOOT_TIMEOUT_MS = 600_000;

interface Job {
  readonly name: string;
  readonly rw: "read" | "write" | "randread" | "randwrite";
  readonly bs: string;
  readonly qd: number;
}
const JOBS: readonly Job[] = [1, 32].flatMap((qd) => [
  { name: `seqread-qd${qd}`, rw: "read" as const, bs: "1M", qd },
  { name: `seqwrite-qd${qd}`, rw: "write" as const, bs: "1M", qd },
  { name: `randread-qd${qd}`, rw: "randread" as const, bs: "4k", qd },
  { name: `randwrite-qd${qd}`, rw: "randwrite" as const, bs: "4k", qd },
]);

/** One fio job's result. */
interface FioResult {
  readonly readBps: number;
  readonly readIops: number;
  readonly writeBps: number;
  readonly writeIops: number;
  readonly readLatNs: number;
}

/** A side's figures as the JSON line reports them. */
interface Figures {
  readonly seqReadMBps: number;
  readonly seqWriteMBps: number;
  readonly randRead4kIops: number;
  readonly randWrite4kIops: number;
  readonly randRead4kQd1LatencyUs: number;
  readonly qd1: { seqReadMBps: number; seqWriteMBps: number; randRead4kIops: number; randWrite4kIops: number };
}

function fioArgs(job: Job, file: string, direct: boolean): string[] {
  return [
    `--name=${job.name}`,
    `--filename=${file}`,
    `--direct=${direct ? 1 : 0}`,
    "--ioengine=libaio",
    `--rw=${job.rw}`,
    `--bs=${job.bs}`,
    `--iodepth=${job.qd}`,
    `--size=${DATA_BYTES}`,
    `--runtime=${RUNTIME_S}`,
    "--time_based",
    "--ramp_time=1",
    "--randrepeat=0",
    "--output-format=json",
  ];
}

/** The guest's init: mounts, then each job, then power-off through sysrq (PID 1 never exits). */
function guestScript(): string {
  const py =
    "import json,sys;j=json.load(open('/tmp/'+sys.argv[1]+'.json'))['jobs'][0];r,w=j['read'],j['write'];" +
    "print('KVT_FIO',sys.argv[1],r['bw_bytes'],r['iops'],w['bw_bytes'],w['iops'],r['clat_ns']['mean'],w['clat_ns']['mean'])";
  const lines = [
    "mount -t proc proc /proc 2>/dev/null",
    "mount -t sysfs sysfs /sys 2>/dev/null",
    "mount -t tmpfs tmpfs /tmp",
    // What the guest's block layer made of each side's virtio-blk (the limits it advertised), and per job the
    // requests that reached the device and the interrupts its queue raised (how well each side batches).
    "q=/sys/block/vdb/queue; d=$(basename $(readlink /sys/block/vdb/device))",
    `echo KVT_QUEUE ${QUEUE_FILES.map((f) => `${f}=$(cat $q/${f})`).join(" ")} hw_queues=$(ls /sys/block/vdb/mq | wc -l)`,
    `irq() { awk -v d="$d-" 'index($0, d) { for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i } END { print s + 0 }' /proc/interrupts; }`,
    "ios() { awk '{ print $1 + $5 }' /sys/block/vdb/stat; }",
    "echo KVT_FIO_READY",
    ...JOBS.flatMap((job) => [
      "i0=$(irq); n0=$(ios)",
      `fio ${fioArgs(job, "/dev/vdb", true).join(" ")} --output=/tmp/${job.name}.json >/dev/null 2>&1`,
      `echo KVT_DEV ${job.name} $(( $(ios) - n0 )) $(( $(irq) - i0 ))`,
      `python3 -c "${py}" ${job.name}`,
    ]),
    "echo KVT_FIO_DONE",
    "echo o >/proc/sysrq-trigger",
    "sleep 60",
  ];
  return `${lines.join("\n")}\n`;
}

/** The guest's view of the measured disk (/sys/block/vdb/queue/<file>), printed as KVT_QUEUE. */
const QUEUE_FILES = ["max_sectors_kb", "max_hw_sectors_kb", "max_segments", "max_segment_size", "nr_requests"];

/** A side's device figures: the guest's queue limits, and per job requests and interrupts (KVT_QUEUE, KVT_DEV). */
interface DeviceView {
  readonly queue: Record<string, number>;
  readonly jobs: Record<string, { requests: number; interrupts: number }>;
}

function parseDevice(text: string): DeviceView {
  const queue: Record<string, number> = {};
  for (const m of (/KVT_QUEUE ([^\r\n]*)/.exec(text)?.[1] ?? "").matchAll(/(\w+)=(\d+)/g)) {
    queue[m[1] ?? ""] = Number(m[2]);
  }
  const jobs: DeviceView["jobs"] = {};
  for (const m of text.matchAll(/KVT_DEV (\S+) (\d+) (\d+)/g)) {
    jobs[m[1] ?? ""] = { requests: Number(m[2]), interrupts: Number(m[3]) };
  }
  return { queue, jobs };
}

/** Parses the KVT_FIO lines of a console. */
function parseFio(text: string): Map<string, FioResult> {
  const out = new Map<string, FioResult>();
  for (const m of text.matchAll(/KVT_FIO (\S+) (\d+) ([\d.]+) (\d+) ([\d.]+) ([\d.]+) ([\d.]+)/g)) {
    out.set(m[1] ?? "", {
      readBps: Number(m[2]),
      readIops: Number(m[3]),
      writeBps: Number(m[4]),
      writeIops: Number(m[5]),
      readLatNs: Number(m[6]),
    });
  }
  return out;
}

function figures(r: Map<string, FioResult>): Figures {
  const get = (name: string): FioResult => {
    const v = r.get(name);
    if (!v) throw new Error(`no result for fio job ${name}`);
    return v;
  };
  const mb = (bps: number): number => Math.round(bps / 1e4) / 100;
  const n = (x: number): number => Math.round(x);
  return {
    seqReadMBps: mb(get("seqread-qd32").readBps),
    seqWriteMBps: mb(get("seqwrite-qd32").writeBps),
    randRead4kIops: n(get("randread-qd32").readIops),
    randWrite4kIops: n(get("randwrite-qd32").writeIops),
    randRead4kQd1LatencyUs: Math.round(get("randread-qd1").readLatNs / 10) / 100,
    qd1: {
      seqReadMBps: mb(get("seqread-qd1").readBps),
      seqWriteMBps: mb(get("seqwrite-qd1").writeBps),
      randRead4kIops: n(get("randread-qd1").readIops),
      randWrite4kIops: n(get("randwrite-qd1").writeIops),
    },
  };
}

/** Each figure's median over the rounds (the mean of the middle two for an even count); undefined for none. */
function medianFigures(all: readonly Figures[]): Figures | undefined {
  if (all.length === 0) return undefined;
  const med = (pick: (f: Figures) => number): number => {
    const v = all.map(pick).sort((a, b) => a - b);
    const m = Math.floor(v.length / 2);
    const x = v.length % 2 ? (v[m] ?? 0) : ((v[m - 1] ?? 0) + (v[m] ?? 0)) / 2;
    return Math.round(x * 100) / 100;
  };
  return {
    seqReadMBps: med((f) => f.seqReadMBps),
    seqWriteMBps: med((f) => f.seqWriteMBps),
    randRead4kIops: Math.round(med((f) => f.randRead4kIops)),
    randWrite4kIops: Math.round(med((f) => f.randWrite4kIops)),
    randRead4kQd1LatencyUs: med((f) => f.randRead4kQd1LatencyUs),
    qd1: {
      seqReadMBps: med((f) => f.qd1.seqReadMBps),
      seqWriteMBps: med((f) => f.qd1.seqWriteMBps),
      randRead4kIops: Math.round(med((f) => f.qd1.randRead4kIops)),
      randWrite4kIops: Math.round(med((f) => f.qd1.randWrite4kIops)),
    },
  };
}

function sparse(path: string, bytes: number): void {
  const fd = openSync(path, "w");
  try {
    ftruncateSync(fd, bytes);
  } finally {
    closeSync(fd);
  }
}

/** data.img: DATA_BYTES of non-zero data (reads of holes would measure nothing), one MiB pattern repeated. */
function makeData(path: string): void {
  const block = Buffer.alloc(2 ** 20);
  for (let i = 0; i < block.length; i += 4) block.writeUInt32LE((i * 2654435761) >>> 0, i);
  const fd = openSync(path, "w");
  try {
    for (let at = 0; at < DATA_BYTES; at += block.length) writeSync(fd, block, 0, block.length, at);
  } finally {
    closeSync(fd);
  }
}

async function waitFor(get: () => string, re: RegExp, timeoutMs: number, exited: () => boolean): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!re.test(get())) {
    if (exited()) throw new Error(`the guest stopped before ${re}: ${JSON.stringify(get().slice(-600))}`);
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${re}: ${JSON.stringify(get().slice(-600))}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const resolve = imageStoreResolver(process.env.KVT_IMAGE_STORE ?? join(root, ".data/images"));
const boot = resolve(IMAGE);
if (!boot.diskPath || !boot.initrdPath) throw new Error(`${IMAGE} has no disk or initrd: build it with tools/images`);
const image = boot.diskPath;
const imageBytes = statSync(image).size;
const cmdline = `${boot.cmdline ?? "root=/dev/vda rw console=ttyS0 quiet panic=-1"} init=/bin/sh -- /dev/vdc`;
const dir = mkdtempSync(join(tmpdir(), "kvt-disk-bench-"));
const data = join(dir, "data.img");
const script = join(dir, "script.img");
const lane = benchLane();
const kvm = kvmRunsLinux();

/** One side's guest run: its fio results and its device view. */
interface GuestRun {
  readonly fio: Map<string, FioResult>;
  readonly device: DeviceView;
}

/** fio in the guest on our VMM; undefined (with the reason printed) where KVM cannot run Linux. */
async function ours(): Promise<GuestRun | undefined> {
  if (!kvm) {
    process.stdout.write("ours: skipped: this host's KVM cannot run Linux (run the bench without --host)\n");
    return undefined;
  }
  const overlay = join(dir, "ours-root.img");
  sparse(overlay, imageBytes);
  let text = "";
  let stopped = false;
  const vm = Vm.create({
    memoryBytes: GUEST_MEMORY,
    vcpus: VCPUS,
    boot: {
      kind: "linux",
      kernelPath: boot.uncompressedKernelPath ?? boot.kernelPath,
      initrdPath: boot.initrdPath,
      cmdline,
      disks: [
        { path: overlay, base: image, serial: "root" },
        { path: data, serial: "data" },
        { path: script, readOnly: true, serial: "script" },
      ],
    },
  });
  vm.on("serial-output", (c) => {
    text += Buffer.from(c).toString("latin1");
  });
  vm.on("shutdown", () => {
    stopped = true;
  });
  const t0 = Date.now();
  vm.start();
  try {
    await waitFor(
      () => text,
      /KVT_FIO_READY/,
      BOOT_TIMEOUT_MS,
      () => stopped,
    );
    process.stdout.write(`ours: guest ready in ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
    await waitFor(
      () => text,
      /KVT_FIO_DONE/,
      JOBS.length * (RUNTIME_S + 60) * 1000,
      () => stopped,
    );
    return { fio: parseFio(text), device: parseDevice(text) };
  } finally {
    vm.stop();
    rmSync(overlay, { force: true });
  }
}

/** fio in the guest on QEMU, -accel kvm where KVM runs Linux (else TCG, said so). */
async function qemu(): Promise<GuestRun> {
  const overlay = join(dir, "qemu-root.qcow2");
  writeQcow2Overlay(overlay, image, "raw", imageBytes);
  const disks = [
    { name: "root", path: overlay, format: "qcow2" as const },
    { name: "data", path: data, cache: "writeback" as const },
    { name: "script", path: script, readOnly: true },
  ].map((d) => ({ kind: "emptyDisk" as const, shared: false, readOnly: false, ...d }));
  const accel = kvm ? ["-accel", "kvm", "-cpu", "host"] : ["-accel", "tcg"];
  if (!kvm) process.stdout.write("qemu: TCG (no KVM that runs Linux here): not comparable with ours\n");
  const args = [
    ...accel,
    ...["-m", String(GUEST_MEMORY / 2 ** 20), "-smp", String(VCPUS), "-nographic", "-no-reboot", "-nodefaults"],
    ...["-serial", "stdio", "-kernel", boot.kernelPath, "-initrd", boot.initrdPath ?? "", "-append", cmdline],
    ...disks.flatMap((d, i) => diskArgs(d, i)),
  ];
  let text = "";
  let exited = false;
  const child: ChildProcess = spawn("qemu-system-x86_64", args, { stdio: ["ignore", "pipe", "pipe"] });
  child.stdout?.on("data", (c: Buffer) => {
    text += c.toString("latin1");
  });
  child.stderr?.on("data", (c: Buffer) => {
    text += c.toString("latin1");
  });
  child.on("exit", () => {
    exited = true;
  });
  const t0 = Date.now();
  try {
    await waitFor(
      () => text,
      /KVT_FIO_READY/,
      BOOT_TIMEOUT_MS,
      () => exited,
    );
    process.stdout.write(`qemu: guest ready in ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
    await waitFor(
      () => text,
      /KVT_FIO_DONE/,
      JOBS.length * (RUNTIME_S + 60) * 1000,
      () => exited,
    );
    return { fio: parseFio(text), device: parseDevice(text) };
  } finally {
    if (!exited) child.kill("SIGKILL");
    rmSync(overlay, { force: true });
  }
}

/**
 * fio on data.img itself (direct I/O; buffered where the file system has no O_DIRECT, e.g. L1's tmpfs). fio is
 * installed when missing (root); in L1, which cannot install, it is there when the host installed it (bench-lane.ts).
 */
async function host(): Promise<{ results: Map<string, FioResult>; direct: boolean } | undefined> {
  try {
    await ensureHostTools([{ bin: "fio", pkg: "fio" }], (line) => void process.stdout.write(`host: ${line}\n`));
  } catch (err) {
    // The guests' figures stand without the host's: say why they are missing (the message names the command).
    if (!(err instanceof HostToolError)) throw err;
    process.stdout.write(`host: skipped: ${err.message}\n`);
    return undefined;
  }
  const probe = spawnSync("fio", [...fioArgs(JOBS[0], data, true), "--runtime=1", "--ramp_time=0"]);
  const direct = probe.status === 0;
  if (!direct) process.stdout.write("host: this file system refuses O_DIRECT: buffered I/O for the host's figures\n");
  const results = new Map<string, FioResult>();
  for (const job of JOBS) {
    const r = spawnSync("fio", fioArgs(job, data, direct), { encoding: "utf8", maxBuffer: 16 << 20 });
    if (r.status !== 0) throw new Error(`host fio ${job.name} failed: ${r.stderr}`);
    const j = (JSON.parse(r.stdout) as { jobs: { read: FioJson; write: FioJson }[] }).jobs[0];
    if (!j) throw new Error(`host fio ${job.name}: no job in its output`);
    results.set(job.name, {
      readBps: j.read.bw_bytes,
      readIops: j.read.iops,
      writeBps: j.write.bw_bytes,
      writeIops: j.write.iops,
      readLatNs: j.read.clat_ns.mean,
    });
  }
  return { results, direct };
}
interface FioJson {
  bw_bytes: number;
  iops: number;
  clat_ns: { mean: number };
}

function row(label: string, f: Figures | undefined): string {
  if (!f) return `${label.padEnd(6)} (not measured)`;
  const c = (v: number): string => String(v).padStart(10);
  return (
    `${label.padEnd(6)}${c(f.seqReadMBps)}${c(f.seqWriteMBps)}${c(f.randRead4kIops)}${c(f.randWrite4kIops)}` +
    `${c(f.randRead4kQd1LatencyUs)}   qd1: ${f.qd1.seqReadMBps} / ${f.qd1.seqWriteMBps} MB/s, ` +
    `${f.qd1.randRead4kIops} / ${f.qd1.randWrite4kIops} IOPS`
  );
}

/** The guest's queue limits and requests per interrupt, per job, of both sides (empty when neither ran). */
function deviceRows(o: DeviceView | undefined, q: DeviceView | undefined): string {
  if (!o && !q) return "";
  const limits = (v: DeviceView | undefined): string =>
    v
      ? Object.entries(v.queue)
          .map(([k, n]) => `${k}=${n}`)
          .join(" ")
      : "(not measured)";
  const per = (v: DeviceView | undefined, job: string): string => {
    const j = v?.jobs[job];
    return j ? `${j.requests}/${j.interrupts}` : "-";
  };
  return (
    `guest queue limits (vdb): ours ${limits(o)}\n                          qemu ${limits(q)}\n` +
    `requests/interrupts per job: ${JOBS.map((j) => `${j.name} ours ${per(o, j.name)} qemu ${per(q, j.name)}`).join("; ")}\n`
  );
}

try {
  const oursRuns: GuestRun[] = [];
  const qemuRuns: GuestRun[] = [];
  const hostRuns: NonNullable<Awaited<ReturnType<typeof host>>>[] = [];
  if (FIO) {
    makeData(data);
    const s = Buffer.alloc(64 * 1024, "\n");
    s.write(guestScript());
    writeFileSync(script, s);
    // Rounds in alternating order (ours, host, QEMU, then QEMU, host, ours, ...): the machine is shared, and a
    // side measured alone reads whatever else ran at that moment. The host (the limit of the sequential goal) runs
    // in every round between the two guests, not once at the end: one sample of it against the guests' medians
    // read 98 MB/s beside 188 in one loaded run. Each figure is the median of its rounds.
    for (let r = 0; r < ROUNDS; r++) {
      for (const side of r % 2 === 0 ? ["ours", "host", "qemu"] : ["qemu", "host", "ours"]) {
        process.stdout.write(`round ${r + 1}/${ROUNDS}: ${side}\n`);
        const hr = side === "host" ? await host() : undefined;
        const run = side === "host" ? undefined : side === "qemu" ? await qemu() : await ours();
        if (hr) hostRuns.push(hr);
        if (run) (side === "qemu" ? qemuRuns : oursRuns).push(run);
      }
    }
  }
  const h = hostRuns.at(-1);
  const o = oursRuns[0];
  const q = qemuRuns[0];
  for (const [side, runs] of [
    ["ours", oursRuns.map((run) => run.fio)],
    ["qemu", qemuRuns.map((run) => run.fio)],
    ["host", hostRuns.map((run) => run.results)],
  ] as const) {
    runs.forEach((fio, i) => void process.stdout.write(`${row(`${side}${i + 1}`, figures(fio))}\n`));
  }
  const oursF = medianFigures(oursRuns.map((run) => figures(run.fio)));
  const qemuF = medianFigures(qemuRuns.map((run) => figures(run.fio)));
  const hostF = medianFigures(hostRuns.map((run) => figures(run.results)));
  rmSync(data, { force: true }); // room in L1's tmpfs for the migration's disks
  let migration: DiskMigrationFigures | { error: string } | null = null;
  if (MIGRATION_BYTES > 0 && kvm) {
    try {
      migration = await migrationWithDisk(resolve("local/demo-linux:latest"), dir, MIGRATION_BYTES, kvm);
    } catch (err) {
      // The fio figures stand on their own: the JSON line says why the migration part has none.
      migration = { error: (err as Error).message };
    }
  }
  if (migration && !("error" in migration)) {
    const m = migration;
    const verdict = (met: boolean | null): string => (met === null ? "unknown" : met ? "met" : "not met");
    process.stdout.write(
      `migration with a ${MIGRATION_BYTES / 2 ** 20} MiB non-shared disk (total s, downtime ms):\n` +
        `  plaintext: ours ${m.totalSeconds} s / ${m.downtimeMs} ms, QEMU block migration ${m.qemuTotalSeconds} s / ` +
        `${m.qemuDowntimeMs} ms${m.qemuError ? ` (failed: ${m.qemuError})` : ""}: goal ${verdict(m.goalMet)}\n` +
        `  encrypted: ours ${m.encryptedTotalSeconds} s / ${m.encryptedDowntimeMs} ms, QEMU over TLS ` +
        `${m.qemuTlsTotalSeconds} s / ${m.qemuTlsDowntimeMs} ms${m.qemuTlsError ? ` (failed: ${m.qemuTlsError})` : ""}: ` +
        `${verdict(m.encryptedGoalMet)}\n  ours' phases: ${JSON.stringify(m.phases)}\n`,
    );
  } else {
    const why = migration
      ? `failed: ${migration.error}`
      : "skipped (no KVM that runs Linux here, or --migration-mib 0)";
    process.stdout.write(`migration with a disk: ${why}\n`);
  }
  process.stdout.write(
    `\ndisk bench (${lane} lane, guest ${VCPUS} vCPU ${GUEST_MEMORY / 2 ** 20} MiB, data ${DATA_BYTES / 2 ** 20} MiB, ` +
      `${RUNTIME_S} s per job, medians of ${ROUNDS} alternated rounds; QD32 unless marked)\n` +
      `side    seqRd MB/s seqWr MB/s  rndRd IOPS rndWr IOPS  QD1 rd us\n` +
      `${row("ours", oursF)}\n${row("qemu", qemuF)}\n${row("host", hostF)}\n` +
      deviceRows(o?.device, q?.device),
  );
  const ratio = (a: number | undefined, b: number): number | null =>
    a === undefined || b === 0 ? null : Math.round((a / b) * 100) / 100;
  const vsQemu =
    oursF && qemuF
      ? {
          seqRead: ratio(oursF.seqReadMBps, qemuF.seqReadMBps),
          seqWrite: ratio(oursF.seqWriteMBps, qemuF.seqWriteMBps),
          randRead4k: ratio(oursF.randRead4kIops, qemuF.randRead4kIops),
          randWrite4k: ratio(oursF.randWrite4kIops, qemuF.randWrite4kIops),
          qd1LatencyQemuOverOurs: ratio(qemuF.randRead4kQd1LatencyUs, oursF.randRead4kQd1LatencyUs),
        }
      : null;
  const vsHost =
    oursF && hostF
      ? {
          seqRead: ratio(oursF.seqReadMBps, hostF.seqReadMBps),
          seqWrite: ratio(oursF.seqWriteMBps, hostF.seqWriteMBps),
        }
      : null;
  process.stdout.write(
    `${JSON.stringify({
      area: "disk",
      lane,
      ours: oursF ?? null,
      qemu: qemuF ?? null,
      host: hostF ?? null,
      hostDirectIo: h?.direct ?? null,
      qemuAccel: kvm ? "kvm" : "tcg",
      rounds: ROUNDS,
      oursVsQemu: vsQemu,
      oursVsHost: vsHost,
      migrationWithDisk: migration,
      devices: o || q ? { ours: o?.device ?? null, qemu: q?.device ?? null } : null,
    })}\n`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
