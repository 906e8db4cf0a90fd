/**
 * The seed's VM as a user of the local cluster would see it, inside L1: the seed's vm-cirros VM (its
 * cloudInitNoCloud user data unchanged, its containerDisk the demo image) runs in a real virt-launcher process,
 * driven over launcher-rpc as virt-handler drives it, and is live-migrated to a second launcher process.
 *
 *   seedVmi() (seed-vmi.ts)                  launcher A (node-a)                     launcher B (node-b)
 *   sync {vmi} ----------------------------> toMachineSpec, backend choice: native
 *   console <------------------------------- boot marker, "printed from cloud-init userdata"
 *   `echo hi`, product_uuid, disk marker ---> hi, firmware.uuid, marker on the shared disk (serial SHARED)
 *   local disk marker ----------------------> marker on the emptyDisk (serial LOCAL), a file on node-a only
 *   counter --------------------------------> count 0 1 2 ...
 *   prepare-target {migrationUid, vmi, tls} -------------------------------------->  listens: {host, port, secret,
 *   source-certificate {the source's} -------------------------------------------->   certificate}, pins the source's
 *   migrate {target, options (KubeVirt defaults), tls} -> TLS 1.3, each pinned ---->  restore, vCPUs run
 *   events: migration-result ok <------------ Migrated, exits 0        console: count N+1 ...  `echo hi`: hi
 *                                                                      both disk markers read back (the local
 *                                                                      one came in the migration stream)
 *                                                                      `poweroff` --> Shutdown, exits 0
 *
 * The VMI also has a shared hostDisk (both "nodes" mount the same directory, as an RWX claim would be), so the
 * launcher's disk plumbing runs on our VMM: a virtio disk found by its serial, written before the move and read after.
 *
 * Check names start with `vm-cirros-`; `guest-checks.ts vm-cirros` runs only these.
 */
import { randomUUID } from "node:crypto";
import { mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type VirtualMachineInstance, VMI_DISKS_DIR } from "@kvt/api";
import { mintMigrationCertificate } from "@kvt/certs";
import { DEMO_BOOT_MARKER } from "@kvt/images";
import {
  KUBEVIRT_MIGRATION_DEFAULTS,
  type LauncherClient,
  type LauncherEvent,
  type MigrationResult,
  type MigrationTlsIdentity,
} from "@kvt/launcher-rpc";
import { check, converse, typeLine, within } from "./check-runner.ts";
import { CLOUD_INIT_LINE } from "./demo-guest.ts";
import { attachConsole, type LauncherConsole, type LauncherPeer, startLauncher } from "./launcher-peer.ts";
import { COUNTS_ON_TARGET, countsOnTarget } from "./live-migration-checks.ts";
import { COUNTER_LOOP, judgeCounter } from "./migration-verdict.ts";
import { seedVmi, userDataOf } from "./seed-vmi.ts";

/** A launcher's Node start under TCG (L1) takes tens of seconds; its socket appears only after that. */
export const LAUNCHER_START_MS = 240_000;

/** The shared hostDisk's volume name and serial, and what the guest writes to it. */
const SHARED_DISK = "shared";
const SHARED_SERIAL = "SHARED";
const DISK_MARKER = "kd42";
// Console lines fit the UART's 64-byte FIFO (check-runner MAX_CONSOLE_LINE), so the shell work is cut short.
/** Shell: $D = the virtio disk whose serial is SHARED. */
const FIND_SHARED = `D=/dev/$(grep -l ${SHARED_SERIAL} /sys/block/vd*/serial|cut -d/ -f4)`;
/** The marker is computed in the guest, so the typed command's echo never matches the answer. */
const WRITE_MARKER = "echo kd$((40+2))|dd of=$D conv=sync,fsync;echo W=$? E";
const READ_MARKER = "echo R=$(dd if=$D count=1 2>/dev/null|head -n1) E";
/** The local emptyDisk (serial LOCAL): its contents move with the memory, in the migration stream. */
const LOCAL_DISK = "scratch";
const LOCAL_SERIAL = "LOCAL";
const FIND_LOCAL = `L=/dev/$(grep -l ${LOCAL_SERIAL} /sys/block/vd*/serial|cut -d/ -f4)`;
// Answers named apart from the shared disk's (WL=, RL=): converse() types a command again when the guest is slow
// to answer, and the extra answer of the shared disk's command must not pass for the local disk's (it once did).
const WRITE_LOCAL = "echo kl$((40+2))|dd of=$L conv=sync,fsync;echo WL=$? E";
const READ_LOCAL = "echo RL=$(dd if=$L count=1 2>/dev/null|head -n1) E";

/**
 * `vmi` with a 16 MiB shared hostDisk (DiskOrCreate, serial SHARED) and a 16 MiB emptyDisk (serial LOCAL, copied
 * to the target by the migration), both on the virtio bus.
 */
function withSharedDisk(vmi: VirtualMachineInstance): VirtualMachineInstance {
  const v = structuredClone(vmi);
  const devices = v.spec.domain.devices;
  devices.disks = [
    ...(devices.disks ?? []),
    { name: SHARED_DISK, serial: SHARED_SERIAL, disk: { bus: "virtio" } },
    { name: LOCAL_DISK, serial: LOCAL_SERIAL, disk: { bus: "virtio" } },
  ];
  v.spec.volumes = [
    ...(v.spec.volumes ?? []),
    {
      name: SHARED_DISK,
      hostDisk: { path: "/var/lib/kvt/shared.img", type: "DiskOrCreate", capacity: "16Mi", shared: true },
    },
    { name: LOCAL_DISK, emptyDisk: { capacity: "16Mi" } },
  ];
  return v;
}

/** Collects a launcher's event stream and waits for an event, as virt-handler's watch does. */
export class EventLog {
  readonly events: LauncherEvent[] = [];
  readonly #abort = new AbortController();
  #waiters: { match: (e: LauncherEvent) => boolean; done: (e: LauncherEvent) => void }[] = [];

  constructor(client: LauncherClient) {
    client
      .watchEvents((e) => {
        this.events.push(e);
        this.#waiters = this.#waiters.filter((w) => {
          if (w.match(e)) w.done(e);
          return !w.match(e);
        });
      }, this.#abort.signal)
      .catch(() => {}); // a launcher exiting ends its stream; the checks look at what arrived
  }

  /** The first event matching `match`, already seen or still to come. */
  next(match: (e: LauncherEvent) => boolean, ms: number, what: string): Promise<LauncherEvent> {
    const seen = this.events.find(match);
    if (seen) return Promise.resolve(seen);
    return within(new Promise((done) => this.#waiters.push({ match, done })), ms, what);
  }

  close(): void {
    this.#abort.abort();
  }
}

/** The per-migration TLS identities the two handlers would mint for their launchers (each launcher pins the other's). */
export async function migrationIdentities(): Promise<MigrationTlsIdentity[]> {
  return Promise.all(
    ["source", "target"].map(async (side) => {
      const minted = await mintMigrationCertificate(`kubevirt.io:migration:nested:${side}`);
      return { certificate: minted.certPem, key: minted.keyPem };
    }),
  );
}

/** A disk the checks find by serial (`find` sets shell variable `v`) and write a marker to (`write` answers `answer=`). */
interface DiskIo {
  readonly find: string;
  readonly v: string;
  readonly serial: string;
  readonly write: string;
  readonly answer: string;
}
const SHARED_DISK_IO: DiskIo = { find: FIND_SHARED, v: "D", serial: SHARED_SERIAL, write: WRITE_MARKER, answer: "W" };
const LOCAL_DISK_IO: DiskIo = { find: FIND_LOCAL, v: "L", serial: LOCAL_SERIAL, write: WRITE_LOCAL, answer: "WL" };

/** Finds `disk` in the guest and writes its marker; the device it found. */
async function writeDiskMarker(c: LauncherConsole, disk: DiskIo): Promise<string> {
  typeLine(c, disk.find);
  const found = await converse(c, `echo ${disk.v}=$${disk.v} E`, new RegExp(`^${disk.v}=.* E$`), 30_000);
  if (!new RegExp(`^${disk.v}=/dev/vd[a-z]+ E$`).test(found.line))
    throw new Error(`no disk with serial ${disk.serial}: ${found.line}`);
  const wrote = await converse(c, disk.write, new RegExp(`^${disk.answer}=.* E$`), 30_000);
  if (wrote.line !== `${disk.answer}=0 E`) throw new Error(`dd answered ${wrote.line}`);
  return found.line.slice(2, -2);
}

/** Runs the vm-cirros checks; `bootTimeoutMs` bounds the boot to the marker. */
export async function vmCirrosChecks(bootTimeoutMs: number): Promise<void> {
  const vmi = withSharedDisk(seedVmi({ namespace: "default", uid: randomUUID() }));
  const who = { namespace: "default", name: vmi.metadata?.name ?? "", uid: vmi.metadata?.uid ?? "" };
  const root = join(tmpdir(), `kvt-vm-cirros-${who.uid.slice(0, 8)}`);
  // The directory both launchers see at the hostDisk's mount path (one machine, as an RWX claim's volume).
  const volumeMounts = [{ mountPath: `${VMI_DISKS_DIR}/${SHARED_DISK}`, hostPath: join(root, "shared-volume") }];
  mkdirSync(volumeMounts[0].hostPath, { recursive: true });
  const peers: LauncherPeer[] = [];
  const consoles: LauncherConsole[] = [];
  const logs: EventLog[] = [];
  try {
    await run();
  } finally {
    for (const c of consoles) c.close();
    for (const l of logs) l.close();
    for (const p of peers) await p.kill();
  }

  async function run(): Promise<void> {
    let source: { peer: LauncherPeer; console: LauncherConsole; events: EventLog } | undefined;
    await check("vm-cirros-launcher-sync", async () => {
      const userData = userDataOf(vmi);
      if (!userData?.includes(CLOUD_INIT_LINE)) throw new Error(`the seed's user data no longer prints the line`);
      const t0 = performance.now();
      const peer = await startLauncher(
        { nodeName: "node-a", nodeDir: join(root, "node-a"), vmi: who, volumeMounts },
        LAUNCHER_START_MS,
      );
      peers.push(peer);
      const served = performance.now() - t0;
      const events = new EventLog(peer.client);
      logs.push(events);
      const info = await peer.client.sync({ vmi: vmi as unknown as Record<string, unknown> }, { timeoutMs: 120_000 });
      if (info.state !== "Running") throw new Error(`sync left the domain ${info.state} (${info.reason ?? ""})`);
      if (info.backend !== "native" || info.emulated)
        throw new Error(`backend ${info.backend} (emulated ${info.emulated}): ${info.backendReason ?? ""}`);
      const synced = performance.now() - t0 - served;
      const console = await attachConsole(peer.client);
      consoles.push(console);
      source = { peer, console, events };
      return (
        `launcher serving after ${Math.round(served)} ms, sync ${Math.round(synced)} ms: Running on backend ` +
        `native${info.backendReason ? ` (${info.backendReason})` : ""}, pod ${peer.podName}`
      );
    });
    if (!source) return;
    const src = source;
    const booted = await check("vm-cirros-boot", async () => {
      const m = await src.console.console.waitFor(new RegExp(DEMO_BOOT_MARKER), bootTimeoutMs);
      return `marker ${Math.round(m.atMs)} ms after the console attached: ${m.line}`;
    });
    if (!booted) return;
    await check("vm-cirros-cloud-init-userdata", async () => {
      return (await src.console.console.waitFor(new RegExp(CLOUD_INIT_LINE), 30_000)).line;
    });
    const answered = await check("vm-cirros-console-echo-hi", async () => {
      return `answered: ${(await converse(src.console, "echo h''i", /^hi$/, 30_000)).line}`;
    });
    if (!answered) return;
    // KubeVirt's spec.domain.firmware.uuid (the VM mutator's) as the SMBIOS system UUID the guest reads.
    await check("vm-cirros-firmware-uuid", async () => {
      const want = vmi.spec?.domain.firmware?.uuid ?? "";
      const got = await converse(src.console, "echo U=$(cat /sys/class/dmi/id/product_uuid) E", /^U=.* E$/, 30_000);
      if (got.line.slice(2, -2).toLowerCase() !== want.toLowerCase())
        throw new Error(`the guest reads ${got.line}, the VMI says ${want}`);
      return `/sys/class/dmi/id/product_uuid = spec.domain.firmware.uuid ${want}`;
    });
    await check("vm-cirros-disk-write", async () => {
      const dev = await writeDiskMarker(src.console, SHARED_DISK_IO);
      return `marker written to ${dev} (serial ${SHARED_SERIAL}) and flushed`;
    });
    await check("vm-cirros-local-disk-write", async () => {
      const dev = await writeDiskMarker(src.console, LOCAL_DISK_IO);
      return `marker written to the emptyDisk ${dev} (serial ${LOCAL_SERIAL}), local to node-a`;
    });
    const counting = await check("vm-cirros-counter-started", async () => {
      typeLine(src.console, COUNTER_LOOP);
      return (await src.console.console.waitFor(/count 3$/, 60_000)).line.trim();
    });
    if (!counting) return;

    let target: { peer: LauncherPeer; console: LauncherConsole; events: EventLog } | undefined;
    await check("vm-cirros-live-migration", async () => {
      const t0 = performance.now();
      const peer = await startLauncher(
        { nodeName: "node-b", nodeDir: join(root, "node-b"), vmi: who, volumeMounts },
        LAUNCHER_START_MS,
      );
      peers.push(peer);
      const served = performance.now() - t0;
      const events = new EventLog(peer.client);
      logs.push(events);
      const migrationUid = randomUUID();
      const [sourceTls, targetTls] = await migrationIdentities();
      const address = await peer.client.prepareTarget({ migrationUid, vmi, tls: targetTls }, { timeoutMs: 120_000 });
      await peer.client.sourceCertificate({ migrationUid, certificate: sourceTls.certificate });
      const console = await attachConsole(peer.client);
      consoles.push(console);
      target = { peer, console, events };
      const options = KUBEVIRT_MIGRATION_DEFAULTS;
      await src.peer.client.migrate({ migrationUid, target: address, options, tls: sourceTls });
      const ended = await src.events.next(
        (e) => e.type === "migration-result" && e.migrationUid === migrationUid,
        300_000,
        "the migration result",
      );
      const result = (ended as { result: MigrationResult }).result;
      if (!result.ok)
        throw new Error(`the migration failed: ${result.failureReason}; source log: ${src.peer.logTail()}`);
      await events.next(
        (e) => e.type === "domain" && e.info.state === "Running",
        60_000,
        "the target's domain Running",
      );
      return (
        `target launcher serving after ${Math.round(served)} ms, at ${address.host}:${address.port}; ` +
        `downtime ${Math.round(result.downtimeMs ?? -1)} ms, total ${result.totalSeconds.toFixed(1)} s, ` +
        `${result.iterations} passes, ${(result.bytesSent / 2 ** 20).toFixed(1)} MiB sent; target domain Running`
      );
    });
    if (!target) return;
    const dst = target;
    await check("vm-cirros-counter-continues", async () => {
      await countsOnTarget(src.console, dst.console, 90_000);
      const v = judgeCounter(src.console.console.text, dst.console.console.text, COUNTS_ON_TARGET);
      if (!v.ok) throw new Error(v.detail);
      return v.detail;
    });
    await check("vm-cirros-source-launcher-exit", async () => {
      const code = await within(src.peer.exited, 60_000, "the source launcher's exit");
      if (code !== 0) throw new Error(`the source launcher exited with ${code}; log: ${src.peer.logTail()}`);
      const migrated = src.events.events.some((e) => e.type === "domain" && e.info.state === "Migrated");
      if (!migrated) throw new Error("the source launcher exited 0 without reporting its domain Migrated");
      return "domain Migrated, process exit code 0";
    });
    await check("vm-cirros-target-echo-hi", async () => {
      return `answered on the target: ${(await converse(dst.console, "echo h''i", /^hi$/, 30_000)).line}`;
    });
    await check("vm-cirros-target-disk-read", async () => {
      // $D was set in the shell before the move: the guest's shell state moved with it.
      const got = await converse(dst.console, READ_MARKER, /^R=.* E$/, 30_000);
      if (got.line !== `R=${DISK_MARKER} E`) throw new Error(`the guest read ${got.line}, wrote ${DISK_MARKER}`);
      return `the marker written before the move reads back on the target: ${got.line}`;
    });
    await check("vm-cirros-target-local-disk-read", async () => {
      // node-b's emptyDisk file started empty: the marker can only have come in the migration stream.
      const got = await converse(dst.console, READ_LOCAL, /^RL=.* E$/, 30_000);
      if (got.line !== "RL=kl42 E") throw new Error(`the guest read ${got.line} from its local disk, wrote kl42`);
      return `the emptyDisk's marker moved with the guest: ${got.line}`;
    });
    await check("vm-cirros-target-poweroff", async () => {
      typeLine(dst.console, "poweroff");
      const code = await within(dst.peer.exited, 90_000, "the target launcher's exit after `poweroff`");
      const down = dst.events.events.find((e) => e.type === "domain" && e.info.state === "Shutdown");
      if (code !== 0 || !down) throw new Error(`exit code ${code}, Shutdown reported: ${Boolean(down)}`);
      return `domain Shutdown (${down.type === "domain" ? (down.info.reason ?? "") : ""}), launcher exit code 0`;
    });
  }
}
