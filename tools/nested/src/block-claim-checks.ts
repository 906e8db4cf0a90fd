/**
 * A Block claim's raw device as a disk of our VMM, through the launcher path the claim takes on the local cluster,
 * and live-migrated while both launchers share it, as KubeVirt shares a ReadWriteMany claim (never copied).
 *
 *   L1: a 64 MiB file in /tmp (16 MiB of random data at [8, 24) MiB) --losetup--> /dev/loopN (the claim's device)
 *   VMI: the seed's vm-cirros + volume `data` {persistentVolumeClaim block-rwx} (disk serial BLOCKRWX), its
 *        volumeStatus as virt-controller keeps it (claimInfo: ReadWriteMany, volumeMode Block, 64Mi)
 *   launcher A (node-a), KVT_VOLUME_MOUNTS /dev/data -> /dev/loopN (the process-kubelet's volumeDevices entry)
 *     guest: marker at sector 0, 1 MiB of its random bytes at 32 MiB (fsync: FLUSH), their md5 from the guest
 *   launcher B (node-b), the same device entry --> migrate: ok, no copied-disk bytes (data or zero ranges) sent
 *     guest on B: caches dropped, the source's 1 MiB read back with O_DIRECT: the guest's md5 from A;
 *                 another 1 MiB at 40 MiB; `poweroff`
 *   L1 reads the device (O_DIRECT): the marker, both guests' md5s, its own random region unchanged; losetup -d
 *
 * The assertion that tells a shared disk from a copied one is the migration result's diskBytes/diskZeroBytes of 0:
 * had the launcher planned the claim as a local disk (`migrate: "copy"`), the stream would carry its 17+ MiB of data.
 *
 * Check names start with `block-claim-`; `guest-checks.ts block` runs only these. Needs root (losetup), as the net
 * group does (taps).
 */
import { execFile } from "node:child_process";
import { createHash, randomBytes, randomUUID } from "node:crypto";
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { promisify } from "node:util";
import {
  blockDevicePath,
  claimInfo,
  type VirtualMachineInstance,
  volumeStatusOf,
  volumesMigrationBlocker,
} from "@kvt/api";
import { DEMO_BOOT_MARKER } from "@kvt/images";
import { KUBEVIRT_MIGRATION_DEFAULTS, type MigrationResult } from "@kvt/launcher-rpc";
import { check, converse, typeLine, within } from "./check-runner.ts";
import { attachConsole, type LauncherConsole, type LauncherPeer, startLauncher } from "./launcher-peer.ts";
import { seedVmi } from "./seed-vmi.ts";
import { EventLog, LAUNCHER_START_MS, migrationIdentities } from "./vm-cirros-checks.ts";

const run = promisify(execFile);
const MIB = 1024 * 1024;
/** The claim's device size, the region L1 fills with random data, and where the two guests write. */
const DEVICE_BYTES = 64 * MIB;
const HOST_DATA_AT = 8 * MIB;
const HOST_DATA_BYTES = 16 * MIB;
const SOURCE_AT_MIB = 32;
const TARGET_AT_MIB = 40;

const VOLUME = "data";
const CLAIM = "block-rwx";
const SERIAL = "BLOCKRWX";
/** Sector 0 after the guest's write (computed in the guest, so the typed line's echo never matches). */
const MARKER = "bk42";

// Console lines fit the UART's 64-byte FIFO (check-runner MAX_CONSOLE_LINE). converse() types a command again when
// the guest is slow to answer: every command is idempotent (the payloads are made once) and answers its own name.
const FIND = `D=/dev/$(grep -l ${SERIAL} /sys/block/vd*/serial|cut -d/ -f4)`;
const WRITE_MARKER = "echo bk$((40+2))|dd of=$D conv=sync,fsync;echo WM=$? E";
/** Shell: makes payload file `f` (1 MiB of the guest's random bytes) once; writes it at `atMib` with fsync. */
const makePayload = (f: string): string => `[ -f ${f} ]||dd if=/dev/urandom of=${f} bs=1M count=1;echo MK=$? E`;
const writePayload = (f: string, atMib: number, answer: string): string =>
  `dd if=${f} of=$D bs=1M seek=${atMib} conv=fsync;echo ${answer}=$? E`;
const md5Of = (f: string, answer: string): string => `echo ${answer}=$(md5sum <${f}|cut -c1-32) E`;

/** The seed's VMI with the Block claim's disk, and its volumeStatus as virt-controller fills it for a bound claim. */
function withBlockClaim(vmi: VirtualMachineInstance): VirtualMachineInstance {
  const v = structuredClone(vmi);
  v.spec.domain.devices.disks = [
    ...(v.spec.domain.devices.disks ?? []),
    { name: VOLUME, serial: SERIAL, disk: { bus: "virtio" } },
  ];
  v.spec.volumes = [...(v.spec.volumes ?? []), { name: VOLUME, persistentVolumeClaim: { claimName: CLAIM } }];
  const accessModes = ["ReadWriteMany"];
  const info = claimInfo({
    metadata: { name: CLAIM },
    spec: { accessModes, volumeMode: "Block", resources: { requests: { storage: "64Mi" } } },
    status: { accessModes, capacity: { storage: "64Mi" } },
  });
  const volumeStatus = volumeStatusOf(v, (name) => (name === CLAIM ? info : undefined));
  v.status = { ...v.status, volumeStatus };
  return v;
}

function md5(buf: Uint8Array): string {
  return createHash("md5").update(buf).digest("hex");
}

/** `bytes` of `device` from `offset`, read with O_DIRECT (L1's coreutils dd): what is on the device, not a cache. */
async function readDevice(device: string, offset: number, bytes: number): Promise<Buffer> {
  const { stdout } = await run(
    "dd",
    [`if=${device}`, "bs=1M", `skip=${offset / MIB}`, `count=${Math.ceil(bytes / MIB)}`, "iflag=direct", "status=none"],
    { encoding: "buffer", maxBuffer: bytes + MIB },
  );
  return stdout.subarray(0, bytes);
}

/** The device `losetup` attached to `file`, if any. */
async function loopOf(file: string): Promise<string | undefined> {
  const { stdout } = await run("losetup", ["--list", "--noheadings", "--output", "NAME,BACK-FILE"]);
  return stdout
    .split("\n")
    .map((l) => l.trim().split(/\s+/))
    .find(([, back]) => back === file)?.[0];
}

/** A launcher the checks drive: its process, console and event stream. */
interface Side {
  readonly peer: LauncherPeer;
  readonly console: LauncherConsole;
  readonly events: EventLog;
}

/** What the checks share: the VMI, where its claim lives, and what each step found. */
interface BlockRun {
  readonly vmi: VirtualMachineInstance;
  readonly who: { readonly namespace: string; readonly name: string; readonly uid: string };
  readonly root: string;
  /** The claim's backing file in L1's /tmp, and the random bytes L1 put at HOST_DATA_AT. */
  readonly file: string;
  readonly hostData: Buffer;
  device?: string;
  readonly peers: LauncherPeer[];
  readonly consoles: LauncherConsole[];
  readonly logs: EventLog[];
  /** The guests' md5s of what they wrote at SOURCE_AT_MIB and TARGET_AT_MIB. */
  sourceMd5: string;
  targetMd5: string;
}

/** Runs the block-claim checks; `bootTimeoutMs` bounds the boot to the marker. */
export async function blockClaimChecks(bootTimeoutMs: number): Promise<void> {
  const vmi = withBlockClaim(seedVmi({ namespace: "default", uid: randomUUID() }));
  const who = { namespace: "default", name: vmi.metadata?.name ?? "", uid: vmi.metadata?.uid ?? "" };
  const root = join(tmpdir(), `kvt-block-claim-${who.uid.slice(0, 8)}`);
  const r: BlockRun = {
    vmi,
    who,
    root,
    file: join(root, "claim.img"),
    hostData: randomBytes(HOST_DATA_BYTES),
    peers: [],
    consoles: [],
    logs: [],
    sourceMd5: "",
    targetMd5: "",
  };
  try {
    if (!(await attachClaim(r)) || !r.device) return;
    const source = await startSource(r, bootTimeoutMs);
    if (!source || !(await writeOnSource(r, source))) return;
    const target = await migrate(r, source);
    if (!target) return;
    await afterTheMove(r, source, target);
    await verifyDevice(r, r.device);
  } finally {
    for (const c of r.consoles) c.close();
    for (const l of r.logs) l.close();
    for (const p of r.peers) await p.kill();
    const left = await loopOf(r.file).catch(() => undefined);
    if (left) await run("losetup", ["--detach", left]).catch(() => {});
    rmSync(root, { recursive: true, force: true });
  }
}

/** The claim's device: a loop device over a 64 MiB file in L1's /tmp. */
function attachClaim(r: BlockRun): Promise<boolean> {
  return check("block-claim-loop-device", async () => {
    mkdirSync(r.root, { recursive: true });
    const fd = openSync(r.file, "w");
    try {
      writeSync(fd, r.hostData, 0, r.hostData.length, HOST_DATA_AT);
      writeSync(fd, Buffer.alloc(1), 0, 1, DEVICE_BYTES - 1);
    } finally {
      closeSync(fd);
    }
    const device = (await run("losetup", ["--find", "--show", r.file])).stdout.trim();
    if (!/^\/dev\/loop\d+$/.test(device)) throw new Error(`losetup answered ${JSON.stringify(device)}`);
    r.device = device;
    const blocker = volumesMigrationBlocker(r.vmi);
    if (blocker) throw new Error(`the VMI is not LiveMigratable: ${blocker}`);
    return `${device} over ${r.file} (64 MiB, 16 MiB of random data at 8 MiB); claim ${CLAIM} ReadWriteMany, Block: LiveMigratable`;
  });
}

/**
 * Starts a launcher on `nodeName` with the process-kubelet's KVT_VOLUME_MOUNTS entry of a volumeDevice
 * (container-spec.ts volumeDevices): the pod's devicePath /dev/<volume> -> the node's device. Both "nodes" get the
 * same device, as an RWX claim's.
 */
async function launcher(r: BlockRun, nodeName: string): Promise<{ peer: LauncherPeer; events: EventLog }> {
  const volumeMounts = [{ mountPath: blockDevicePath(VOLUME), hostPath: r.device ?? "" }];
  const peer = await startLauncher(
    { nodeName, nodeDir: join(r.root, nodeName), vmi: r.who, volumeMounts },
    LAUNCHER_START_MS,
  );
  r.peers.push(peer);
  const events = new EventLog(peer.client);
  r.logs.push(events);
  return { peer, events };
}

/** The source launcher runs the VMI on our VMM and the guest boots; undefined when a check failed. */
async function startSource(r: BlockRun, bootTimeoutMs: number): Promise<Side | undefined> {
  let side: Side | undefined;
  await check("block-claim-launcher-sync", async () => {
    const { peer, events } = await launcher(r, "node-a");
    const info = await peer.client.sync({ vmi: r.vmi as unknown as Record<string, unknown> }, { timeoutMs: 120_000 });
    if (info.state !== "Running") throw new Error(`sync left the domain ${info.state} (${info.reason ?? ""})`);
    if (info.backend !== "native" || info.emulated)
      throw new Error(`backend ${info.backend} (emulated ${info.emulated}): ${info.backendReason ?? ""}`);
    if (info.notMigratableReason) throw new Error(`the launcher says not migratable: ${info.notMigratableReason}`);
    const console = await attachConsole(peer.client);
    r.consoles.push(console);
    side = { peer, console, events };
    return `Running on backend native, migratable, ${VOLUME} -> ${r.device} (pod ${peer.podName})`;
  });
  if (!side) return undefined;
  const source = side;
  const booted = await check("block-claim-boot", async () => {
    const m = await source.console.console.waitFor(new RegExp(DEMO_BOOT_MARKER), bootTimeoutMs);
    return `marker ${Math.round(m.atMs)} ms after the console attached`;
  });
  return booted ? source : undefined;
}

/** The guest finds the claim's disk by serial, writes the marker and 1 MiB, flushes; L1 finds them on the device. */
function writeOnSource(r: BlockRun, source: Side): Promise<boolean> {
  return check("block-claim-guest-write", async () => {
    typeLine(source.console, FIND);
    const found = await converse(source.console, "echo D=$D E", /^D=.* E$/, 30_000);
    if (!/^D=\/dev\/vd[a-z]+ E$/.test(found.line)) throw new Error(`no disk with serial ${SERIAL}: ${found.line}`);
    await expectAnswer(source.console, WRITE_MARKER, "WM");
    await expectAnswer(source.console, makePayload("/p"), "MK");
    await expectAnswer(source.console, writePayload("/p", SOURCE_AT_MIB, "WP"), "WP");
    r.sourceMd5 = await guestMd5(source.console, md5Of("/p", "S"), "S");
    // On the device, before the move: L1 reads what the guest flushed.
    const onDevice = md5(await readDevice(r.device ?? "", SOURCE_AT_MIB * MIB, MIB));
    if (onDevice !== r.sourceMd5) throw new Error(`the guest's md5 ${r.sourceMd5}, ${r.device} holds ${onDevice}`);
    return `${found.line.slice(2, -2)} (serial ${SERIAL}): marker at sector 0, 1 MiB at ${SOURCE_AT_MIB} MiB md5 ${r.sourceMd5}, flushed: on ${r.device}`;
  });
}

/**
 * A second launcher with the same device is prepared as the target; `migrate` with KubeVirt's defaults over TLS.
 * The result must say the stream carried no disk data and no zero ranges: the claim is shared, not copied.
 */
async function migrate(r: BlockRun, source: Side): Promise<Side | undefined> {
  let side: Side | undefined;
  await check("block-claim-live-migration", async () => {
    const { peer, events } = await launcher(r, "node-b");
    const migrationUid = randomUUID();
    const [sourceTls, targetTls] = await migrationIdentities();
    const address = await peer.client.prepareTarget(
      { migrationUid, vmi: r.vmi, tls: targetTls },
      { timeoutMs: 120_000 },
    );
    await peer.client.sourceCertificate({ migrationUid, certificate: sourceTls.certificate });
    const console = await attachConsole(peer.client);
    r.consoles.push(console);
    side = { peer, console, events };
    await source.peer.client.migrate({
      migrationUid,
      target: address,
      options: KUBEVIRT_MIGRATION_DEFAULTS,
      tls: sourceTls,
    });
    const ended = await source.events.next(
      (e) => e.type === "migration-result" && e.migrationUid === migrationUid,
      300_000,
      "the migration result",
    );
    const result = (ended as { result: MigrationResult }).result;
    if (!result.ok)
      throw new Error(`the migration failed: ${result.failureReason}; source log: ${source.peer.logTail()}`);
    if (result.diskBytes === undefined || result.diskZeroBytes === undefined)
      throw new Error(`the result has no disk-copy figures: ${JSON.stringify(result)}`);
    if (result.diskBytes !== 0 || result.diskZeroBytes !== 0)
      throw new Error(
        `the shared claim was copied: ${result.diskBytes} B of disk data and ${result.diskZeroBytes} B of zero ranges sent`,
      );
    await events.next((e) => e.type === "domain" && e.info.state === "Running", 60_000, "the target's domain Running");
    return (
      `downtime ${Math.round(result.downtimeMs ?? -1)} ms, total ${result.totalSeconds.toFixed(1)} s, ` +
      `${result.iterations} passes, ${(result.bytesSent / MIB).toFixed(1)} MiB sent, disk data 0 B, zero ranges 0 B`
    );
  });
  return side;
}

/** On the target: the source's write reads back from the device, the guest writes again, powers off. */
async function afterTheMove(r: BlockRun, source: Side, target: Side): Promise<void> {
  await check("block-claim-target-reads-source-write", async () => {
    // $D moved with the guest's shell. The page cache is dropped and the read is O_DIRECT: the bytes come from the
    // device the target opened, not from memory that came in the stream.
    await converse(target.console, "echo 3 >/proc/sys/vm/drop_caches;echo DC=$? E", /^DC=0 E$/, 30_000);
    await expectAnswer(
      target.console,
      `dd if=$D of=/r bs=1M skip=${SOURCE_AT_MIB} count=1 iflag=direct;echo RD=$? E`,
      "RD",
    );
    const got = await guestMd5(target.console, md5Of("/r", "R"), "R");
    if (got !== r.sourceMd5) throw new Error(`the target reads md5 ${got}, the source wrote ${r.sourceMd5}`);
    return `the source's 1 MiB reads back on the target with md5 ${got}`;
  });
  await check("block-claim-target-write", async () => {
    await expectAnswer(target.console, makePayload("/q"), "MK");
    await expectAnswer(target.console, writePayload("/q", TARGET_AT_MIB, "WQ"), "WQ");
    r.targetMd5 = await guestMd5(target.console, md5Of("/q", "T"), "T");
    return `1 MiB at ${TARGET_AT_MIB} MiB md5 ${r.targetMd5}, flushed`;
  });
  await check("block-claim-target-poweroff", async () => {
    const sourceExit = await within(source.peer.exited, 60_000, "the source launcher's exit");
    if (sourceExit !== 0) throw new Error(`the source launcher exited ${sourceExit}: ${source.peer.logTail()}`);
    typeLine(target.console, "poweroff");
    const code = await within(target.peer.exited, 90_000, "the target launcher's exit after `poweroff`");
    const down = target.events.events.find((e) => e.type === "domain" && e.info.state === "Shutdown");
    if (code !== 0 || !down) throw new Error(`exit code ${code}, Shutdown reported: ${Boolean(down)}`);
    return "the source launcher exited 0 after the move; the target's domain Shutdown, launcher exit 0";
  });
}

/** L1 reads the device after both launchers exited: every write is there, its own data unchanged; then detaches it. */
async function verifyDevice(r: BlockRun, dev: string): Promise<void> {
  await check("block-claim-device-verified", async () => {
    const sector0 = (await readDevice(dev, 0, 512)).toString("latin1");
    if (!sector0.startsWith(`${MARKER}\n`))
      throw new Error(`sector 0 of ${dev} starts ${JSON.stringify(sector0.slice(0, 16))}`);
    const atSource = md5(await readDevice(dev, SOURCE_AT_MIB * MIB, MIB));
    const atTarget = md5(await readDevice(dev, TARGET_AT_MIB * MIB, MIB));
    const host = md5(await readDevice(dev, HOST_DATA_AT, HOST_DATA_BYTES));
    const problems = [
      atSource === r.sourceMd5 ? "" : `the source's 1 MiB md5 ${atSource}, the guest wrote ${r.sourceMd5}`,
      r.targetMd5 === "" ? "the target wrote nothing to compare" : "",
      r.targetMd5 === "" || atTarget === r.targetMd5
        ? ""
        : `the target's 1 MiB md5 ${atTarget}, the guest wrote ${r.targetMd5}`,
      host === md5(r.hostData) ? "" : "L1's random region changed",
    ].filter(Boolean);
    if (problems.length > 0) throw new Error(problems.join("; "));
    return `${dev}: marker ${MARKER}, both guests' writes (md5 ${atSource}, ${atTarget}), L1's 16 MiB unchanged`;
  });
  await check("block-claim-loop-detached", async () => {
    await run("losetup", ["--detach", dev]);
    const sys = `/sys/block/${basename(dev)}/loop/backing_file`;
    const deadline = Date.now() + 10_000;
    while (existsSync(sys) || (await loopOf(r.file))) {
      if (Date.now() > deadline)
        throw new Error(`${dev} still backs onto ${existsSync(sys) ? readFileSync(sys, "utf8").trim() : r.file}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    return `${dev} detached`;
  });
}

/** Types `line` until it answers `<name>=...`; throws unless the answer is `<name>=0` (the command's exit status). */
async function expectAnswer(c: LauncherConsole, line: string, name: string): Promise<void> {
  const got = await converse(c, line, new RegExp(`^${name}=.* E$`), 60_000);
  if (got.line !== `${name}=0 E`) throw new Error(`\`${line}\` answered ${got.line}`);
}

/** Types `line` until it answers `<name>=<md5> E`; the md5. */
async function guestMd5(c: LauncherConsole, line: string, name: string): Promise<string> {
  const got = await converse(c, line, new RegExp(`^${name}=[0-9a-f]{32} E$`), 60_000);
  return got.line.slice(name.length + 1, -2);
}
