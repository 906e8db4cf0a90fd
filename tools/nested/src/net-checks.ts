/**
 * The nested lane's virtio-net checks (issue 18): the demo image boots on our VMM with one NIC on a tap the check
 * makes in L1, brings eth0 up with a static address and exchanges traffic with L1; then the guest is live-migrated
 * to a second VMM process whose NIC is another tap on the same bridge, while L1 holds a TCP connection into the guest
 * (probed every 20 ms: the longest silence is the outage) and streams a paced 16 MiB download into it (hashed in
 * the guest: receive buffers filled during the pre-copy must arrive intact); the connection and the link still
 * work there.
 *
 *   L1 (the host)                                         guest (L2, demo image, busybox)
 *   bridge kvtbr0 10.0.77.1/24                            eth0 52:54:00:4b:56:01, 10.0.77.2/24
 *     +-- tap kvtnet0 (source VMM)  <== virtio-net ==>    ping 10.0.77.1; wget from / nc to the host
 *     +-- tap kvtnet1 (target VMM, after the move)
 *   busybox ping 10.0.77.2; an HTTP server (8 MiB down) and a TCP sink (8 MiB up) on 10.0.77.1
 *
 * Everything L1 gets (bridge, taps, address) is made by netSetup() and removed by netTeardown(), whatever fails;
 * L1 is itself a throwaway VM, so nothing leaves it. Each guest command fits the UART's 64-byte FIFO; answers end
 * in "/" (see disk-checks.ts). Commands that take time are typed once (converse would type them again).
 */
import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { createServer as createHttpServer, type Server as HttpServer } from "node:http";
import { connect, createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { DEMO_BOOT_MARKER } from "@kvt/images";
import { longestGap, OutgoingMigration } from "@kvt/migration";
import type { DeviceErrorEvent } from "@kvt/vmm";
import { type ConsolePeer, check, converse, typeLine, within } from "./check-runner.ts";
import { bootDemo, type DemoGuest } from "./demo-guest.ts";
import { nestedDataDir } from "./l1-image.ts";
import { laneMigrationOptions, spawnTarget, type TargetPeer } from "./migration-peer.ts";

const run = promisify(execFile);

/** The guest's MAC (locally administered range QEMU uses) and the addresses on either side. */
export const NET_GUEST_MAC = "52:54:00:4b:56:01";
export const NET_HOST_IP = "10.0.77.1";
export const NET_GUEST_IP = "10.0.77.2";
const BRIDGE = "kvtbr0";
const SOURCE_TAP = "kvtnet0";
const TARGET_TAP = "kvtnet1";
const HTTP_PORT = 7781;
const SINK_PORT = 7782;
const ECHO_PORT = 7783;
/** How often the prober sends a line through the TCP connection that must survive the move. */
const PROBE_INTERVAL_MS = 20;
const TRANSFER_BYTES = 8 * 2 ** 20;

/** L1's busybox (the lane's own download): its ping runs in the job's chroot, which has no iputils. */
const BUSYBOX = join(nestedDataDir, "debs", "busybox-static", "root", "bin", "busybox");

async function ip(...args: string[]): Promise<void> {
  await run("ip", args);
}

/** Makes the bridge with the host address and both taps on it (the VMMs attach to the existing taps). */
async function netSetup(): Promise<string> {
  await netTeardown(); // leftovers of an interrupted run
  await ip("link", "add", BRIDGE, "type", "bridge");
  await ip("addr", "add", `${NET_HOST_IP}/24`, "dev", BRIDGE);
  await ip("link", "set", BRIDGE, "up");
  for (const tap of [SOURCE_TAP, TARGET_TAP]) {
    await ip("tuntap", "add", "dev", tap, "mode", "tap");
    await ip("link", "set", tap, "master", BRIDGE);
    await ip("link", "set", tap, "up");
  }
  return `bridge ${BRIDGE} ${NET_HOST_IP}/24 with taps ${SOURCE_TAP} and ${TARGET_TAP}`;
}

async function netTeardown(): Promise<void> {
  for (const dev of [SOURCE_TAP, TARGET_TAP, BRIDGE]) {
    try {
      await ip("link", "del", dev);
    } catch {
      // not there (first run, or an earlier step failed before making it): nothing to remove
    }
  }
}

/** Runs busybox ping from L1 and returns its round-trip line; throws with its output when a packet is lost. */
async function hostPing(count: number): Promise<string> {
  const [file, ...pre] = existsSync(BUSYBOX) ? [BUSYBOX, "ping"] : ["ping"];
  try {
    const { stdout } = await run(file ?? "ping", [...pre, "-c", String(count), "-W", "10", NET_GUEST_IP]);
    return /round-trip.*|rtt.*/.exec(stdout)?.[0] ?? stdout.trim().split("\n").at(-1) ?? "";
  } catch (err) {
    const out = (err as { stdout?: string }).stdout ?? (err as Error).message;
    throw new Error(`L1 ping ${NET_GUEST_IP} failed: ${out}`, { cause: err });
  }
}

/** Types `cmd` once and waits for an answer line matching `re`; the console text since then is returned too. */
async function once(
  peer: ConsolePeer,
  cmd: string,
  re: RegExp,
  timeoutMs: number,
): Promise<{ line: string; text: string }> {
  const from = peer.console.mark();
  typeLine(peer, cmd);
  const m = await peer.console.waitFor(re, timeoutMs, from);
  return { line: m.line, text: peer.console.text.slice(from) };
}

/** The guest pings L1 three times: the round-trip line, or a throw with what the guest printed. */
async function guestPing(peer: ConsolePeer): Promise<string> {
  const r = await once(peer, `ping -c 3 -W 10 ${NET_HOST_IP};echo p=$?/`, /^p=\d+\/$/, 90_000);
  if (r.line !== "p=0/") throw new Error(`guest ping exited ${r.line}: ${JSON.stringify(r.text.slice(-600))}`);
  return /round-trip.*/.exec(r.text)?.[0] ?? "3 replies";
}

/** busybox `time` output after `from`: seconds of the "real" line. */
function realSeconds(text: string): number | undefined {
  const m = /^real\s+(?:(\d+)m\s*)?([\d.]+)s/m.exec(text);
  return m ? Number(m[1] ?? 0) * 60 + Number(m[2]) : undefined;
}

/**
 * The guest fetches TRANSFER_BYTES from L1's HTTP server (the shell variable h holds its address) and counts them;
 * the seconds wget took. busybox `time` prints on stderr, so the count may come before or after its lines.
 */
async function download(peer: ConsolePeer): Promise<number | undefined> {
  const r = await once(peer, `time wget -q -O - http://$h:${HTTP_PORT}/|wc -c`, /^sys\s/, 180_000);
  const from = peer.console.text.length - r.text.length;
  // The exact count: a pattern like /^\d+$/ could match the first digits of a line still arriving.
  await peer.console.waitFor(new RegExp(`^${TRANSFER_BYTES}$`), 30_000, from);
  return realSeconds(r.text);
}

/**
 * The paced download that runs through the move: its size, chunk and pace (1.25 MiB/s, about 13 s). The move in L1
 * takes 3-7 s (TCG, an encrypted stream), 17 s on a loaded host; the download must outlast it or it proves nothing,
 * so its last chunk waits until the move has returned (Servers.releaseStream).
 */
const STREAM_BYTES = 16 * 2 ** 20;
const STREAM_CHUNK = 64 * 1024;
const STREAM_CHUNK_MS = 50;

/** The servers in L1 the guest talks to, and the paced download's progress. */
interface Servers {
  readonly http: HttpServer;
  readonly sink: Server;
  received(): number;
  /** Bytes of the paced download (GET /r) handed to the socket so far. */
  streamed(): number;
  /** The paced download's MD5 (random bytes, new each run). */
  readonly streamMd5: string;
  /** Lets the paced download send its last chunk (held until then). */
  releaseStream(): void;
}

/**
 * An HTTP server that answers GET / with TRANSFER_BYTES at once and GET /r with STREAM_BYTES of random data paced
 * to a chunk every STREAM_CHUNK_MS, and a TCP sink that counts what it is sent.
 */
async function startServers(): Promise<Servers> {
  const body = Buffer.alloc(TRANSFER_BYTES, 0x5a);
  const random = randomBytes(STREAM_BYTES);
  let streamed = 0;
  let released = false;
  const http = createHttpServer((req, res) => {
    const paced = req.url === "/r";
    const size = paced ? STREAM_BYTES : body.length;
    res.writeHead(200, { "content-type": "application/octet-stream", "content-length": String(size) });
    if (!paced) return void res.end(body);
    let at = 0;
    const timer = setInterval(() => {
      if (!released && at + STREAM_CHUNK >= STREAM_BYTES) return; // the last chunk waits for the move
      const chunk = random.subarray(at, at + STREAM_CHUNK);
      at += chunk.length;
      streamed = at;
      if (at >= STREAM_BYTES) {
        clearInterval(timer);
        res.end(chunk);
      } else {
        res.write(chunk);
      }
    }, STREAM_CHUNK_MS);
    res.on("close", () => clearInterval(timer));
  });
  let received = 0;
  const sink = createServer((socket) => {
    socket.on("data", (d) => {
      received += d.length;
    });
    socket.on("end", () => socket.end()); // nc sends EOF after its input; closing lets it exit
    socket.on("error", () => socket.destroy());
  });
  await new Promise<void>((resolve) => http.listen(HTTP_PORT, NET_HOST_IP, resolve));
  await new Promise<void>((resolve) => sink.listen(SINK_PORT, NET_HOST_IP, resolve));
  return {
    http,
    sink,
    received: () => received,
    streamed: () => streamed,
    streamMd5: createHash("md5").update(random).digest("hex"),
    releaseStream: () => {
      released = true;
    },
  };
}

/**
 * A TCP connection from L1 to the guest's echo server (`nc -l -e cat`) with a numbered line every
 * PROBE_INTERVAL_MS; the replies' arrival times give the longest silence, i.e. the outage a client saw.
 */
interface EchoProber {
  readonly replies: number[];
  /** Set when the connection closed or failed (a migration must not do that). */
  readonly failure: () => string | undefined;
  stop(): void;
}

async function startEchoProber(): Promise<EchoProber> {
  let socket: Socket | undefined;
  for (let i = 0; i < 20 && !socket; i++) {
    socket = await new Promise<Socket | undefined>((resolve) => {
      const s = connect(ECHO_PORT, NET_GUEST_IP);
      s.once("connect", () => resolve(s));
      s.once("error", () => resolve(undefined)); // the guest's nc not listening yet: try again
    });
    if (!socket) await new Promise((r) => setTimeout(r, 500));
  }
  if (!socket) throw new Error(`cannot connect to the guest's echo server ${NET_GUEST_IP}:${ECHO_PORT}`);
  const sock = socket;
  const replies: number[] = [];
  let failure: string | undefined;
  let pending = "";
  sock.setNoDelay(true);
  sock.on("data", (d) => {
    pending += d.toString("latin1");
    const lines = pending.split("\n");
    pending = lines.pop() ?? "";
    for (const _ of lines) replies.push(performance.now());
  });
  sock.on("error", (err) => {
    failure ??= err.message;
  });
  sock.on("close", () => {
    failure ??= "the connection closed";
  });
  let seq = 0;
  const timer = setInterval(() => sock.write(`${seq++}\n`), PROBE_INTERVAL_MS);
  return {
    replies,
    failure: () => failure,
    stop: () => {
      clearInterval(timer);
      sock.removeAllListeners("close");
      sock.destroy();
    },
  };
}

const consolePeer = (g: DemoGuest): ConsolePeer => ({ console: g.console, writeSerial: (t) => g.vm.writeSerial(t) });
const targetPeer = (t: TargetPeer): ConsolePeer => ({ console: t.console, writeSerial: (s) => t.writeSerial(s) });

/** The NIC's counters after the traffic checks: frames both ways, nothing broken, and the data path L1 offers. */
function deviceHealthy(guest: DemoGuest, deviceErrors: readonly DeviceErrorEvent[]): string {
  const st = guest.vm.stats();
  if (st.netRxFrames === 0 || st.netTxFrames === 0) throw new Error(`no frames counted: ${JSON.stringify(st)}`);
  if (st.netBroken !== 0 || deviceErrors.length > 0) {
    throw new Error(`device errors: ${deviceErrors.map((e) => `${e.device}: ${e.reason}`).join(", ")}`);
  }
  // L1 loads vhost_net: the NIC's default data path ("auto") is then the kernel's, as QEMU's vhost=on.
  const vhost = existsSync("/dev/vhost-net");
  if (vhost && (st.netVhost !== 1 || st.netVhostFallbacks !== 0)) {
    throw new Error(`/dev/vhost-net exists but the NIC is not on it: ${JSON.stringify(st)}`);
  }
  // Its receive and transmit interrupts then go straight from vhost into KVM (irqfd on their MSI routes).
  if (vhost && (st.irqfdRoutes !== 2 || st.irqfdFailures !== 0)) {
    throw new Error(`vhost-net's interrupts are not on irqfd routes: ${JSON.stringify(st)}`);
  }
  return (
    `${st.netRxFrames} frames (${st.netRxBytes} B) to the guest, ${st.netTxFrames} (${st.netTxBytes} B) from it, ` +
    `${st.netErrors} dropped, 0 broken; data path ${st.netVhost ? `vhost-net, ${st.irqfdRoutes} irqfd routes` : "userspace"}`
  );
}

/** Runs the net group: setup, boot with a NIC, traffic both ways, a live migration, traffic on the target. */
export async function netChecks(bootTimeoutMs: number): Promise<void> {
  const deviceErrors: DeviceErrorEvent[] = [];
  let g: DemoGuest | undefined;
  let target: TargetPeer | undefined;
  let servers: Servers | undefined;
  let prober: EchoProber | undefined;
  try {
    if (!(await check("net-setup", netSetup))) return;
    const nic = { tap: SOURCE_TAP, mac: NET_GUEST_MAC };
    const booted = await check("net-boot", async () => {
      g = bootDemo({ nics: [nic] });
      g.vm.on("device-error", (e) => deviceErrors.push(e));
      const m = await g.console.waitFor(new RegExp(DEMO_BOOT_MARKER), bootTimeoutMs);
      await converse(consolePeer(g), "echo ready", /^ready$/, 30_000);
      return `marker ${Math.round(m.atMs)} ms with a virtio-net NIC on ${SOURCE_TAP}: ${m.line}`;
    });
    if (!booted || !g) return;
    const guest = g;
    const peer = consolePeer(guest);
    const up = await check("net-guest-eth0-up", async () => {
      const mac = await converse(peer, "echo m=$(cat /sys/class/net/eth0/address)/", /^m=.*\/$/, 30_000);
      if (mac.line !== `m=${NET_GUEST_MAC}/`) {
        throw new Error(`eth0 address ${mac.line}, want ${NET_GUEST_MAC}; ${await netLog(peer)}`);
      }
      await converse(peer, `ip addr add ${NET_GUEST_IP}/24 dev eth0;echo a=$?/`, /^a=\d+\/$/, 30_000);
      await converse(peer, "ip link set eth0 up;echo u=$?/", /^u=0\/$/, 30_000);
      // VIRTIO_NET_F_STATUS: the device says the link is up, so the carrier is on once the interface is.
      const carrier = await converse(peer, "echo c=$(cat /sys/class/net/eth0/carrier)/", /^c=.*\/$/, 30_000);
      if (carrier.line !== "c=1/") throw new Error(`eth0 carrier ${carrier.line}, want 1 (link up)`);
      return `eth0 ${NET_GUEST_MAC} (the MAC from boot.nics), carrier 1, ${NET_GUEST_IP}/24`;
    });
    if (!up) return;
    await check("net-guest-pings-host", async () => `guest -> ${NET_HOST_IP}: ${await guestPing(peer)}`);
    await check("net-host-pings-guest", async () => `${NET_HOST_IP} -> guest: ${await hostPing(3)}`);
    servers = await startServers();
    const s = servers;
    await check("net-tcp-both-ways", async () => {
      await converse(peer, `h=${NET_HOST_IP};echo h=$h/`, new RegExp(`^h=${NET_HOST_IP}/$`), 30_000);
      const down = await download(peer);
      const before = s.received();
      const upCmd = `dd if=/dev/zero bs=64k count=128 2>/dev/null|time nc $h ${SINK_PORT}`;
      const sent = await once(peer, upCmd, /^sys\s/, 180_000);
      const upBytes = s.received() - before;
      if (upBytes !== TRANSFER_BYTES) throw new Error(`the sink got ${upBytes} bytes, want ${TRANSFER_BYTES}`);
      const rate = (t: number | undefined): string =>
        t ? `${(TRANSFER_BYTES / 2 ** 20 / t).toFixed(1)} MiB/s` : "(no time)";
      const d = down;
      const u = realSeconds(sent.text);
      return `8 MiB host -> guest (wget) in ${d?.toFixed(2)} s ${rate(d)}; guest -> host (nc) in ${u?.toFixed(2)} s ${rate(u)}`;
    });
    await check("net-device-healthy", async () => deviceHealthy(guest, deviceErrors));
    // The move: the target's NIC has the same MAC on the other tap of the bridge, as on another node's pod network.
    // A TCP connection into the guest that must live through the move (an echo server; L1 probes it).
    typeLine(peer, `nc -l -p ${ECHO_PORT} -e cat &`);
    prober = await startEchoProber();
    const probe = prober;
    let movedAt = { from: 0, returned: 0, running: 0, to: 0 };
    let streamedAt = { from: 0, to: 0 };
    const moved = await check("net-migration-live", async () => {
      target = await spawnTarget({ nics: [{ tap: TARGET_TAP, mac: NET_GUEST_MAC }] });
      // A paced download into the guest, hashed there, that the move lands in the middle of: receive buffers the
      // device fills during the pre-copy must reach the target (dirty pages), or the hash differs.
      typeLine(peer, `wget -q -O - http://$h:${HTTP_PORT}/r|md5sum>/tmp/m &`);
      const started = Date.now();
      while (s.streamed() < 8 * STREAM_CHUNK && Date.now() - started < 30_000) {
        await new Promise((r) => setTimeout(r, 20));
      }
      if (s.streamed() === 0) throw new Error("the guest's paced download did not start");
      const migration = new OutgoingMigration(guest.vm, target.destination, laneMigrationOptions(target));
      const [from, streamFrom] = [performance.now(), s.streamed()];
      const result = await migration.run();
      streamedAt = { from: streamFrom, to: s.streamed() };
      s.releaseStream();
      const returned = performance.now();
      if (!result.ok) throw new Error(`the migration failed: ${result.failureReason}`);
      await within(target.running, 60_000, "the guest running on the target");
      const running = performance.now();
      guest.vm.stop(); // the source's tap goes quiet: the bridge forgets the guest's MAC on it
      movedAt = { from, returned, running, to: performance.now() };
      return `downtime ${Math.round(result.downtimeMs ?? 0)} ms, total ${result.totalSeconds.toFixed(1)} s, ${result.iterations} passes`;
    });
    if (!moved || !target) return;
    await check("net-migration-tcp-connection-survives", async () => {
      const seen = probe.replies.length;
      const deadline = Date.now() + 30_000;
      // 50 more replies (1 s of probes) after the move, through the target's NIC.
      while (probe.replies.length < seen + 50 && !probe.failure() && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
      }
      const failure = probe.failure();
      if (failure) throw new Error(`the TCP connection into the guest broke: ${failure}`);
      if (probe.replies.length < seen + 50)
        throw new Error(`only ${probe.replies.length - seen} replies after the move`);
      const gap = longestGap(probe.replies, movedAt.from - 1000, performance.now());
      probe.stop();
      // Times relative to the silence's start: where the switch-over fell inside it.
      const at = (t: number): string => `${Math.round(t - gap.startMs)}`;
      return (
        `a TCP connection from L1 to the guest's echo server lived through the move: ${probe.replies.length} ` +
        `replies, longest silence ${Math.round(gap.ms)} ms (a probe every ${PROBE_INTERVAL_MS} ms); from its start ` +
        `the migration returned at ${at(movedAt.returned)} ms, the target reported running at ${at(movedAt.running)}` +
        ` ms, the source VM was closed at ${at(movedAt.to)} ms`
      );
    });
    const dest = targetPeer(target);
    await check("net-migration-download-intact", async () => {
      const mib = (n: number): string => (n / 2 ** 20).toFixed(1);
      // The hash appears once wget has all of it (about 13 s of pacing in all).
      const m = await converse(dest, "echo m=$(cut -c1-32 /tmp/m)/", /^m=[0-9a-f]{32}\/$/, 60_000);
      const got = m.line.slice(2, 34);
      if (got !== s.streamMd5) throw new Error(`the guest's md5 ${got} differs from L1's ${s.streamMd5}`);
      if (streamedAt.to >= STREAM_BYTES) throw new Error("the download ended before the move did: nothing proven");
      // TCP would retransmit a segment a stale receive page garbled, so the hash alone cannot see one: the guest's
      // checksum-error counter can (no GUEST_CSUM: the guest verifies every TCP checksum itself).
      const e = await converse(dest, `awk '/^Tcp:/{v=$NF}END{print "e=" v "/"}' /proc/net/snmp`, /^e=\d+\/$/, 30_000);
      if (e.line !== "e=0/") throw new Error(`the guest counted TCP checksum errors: ${e.line} (InCsumErrors)`);
      return (
        `16 MiB of random bytes downloaded across the move hash alike in the guest and L1 (${got}), 0 TCP checksum errors; ` +
        `${mib(streamedAt.from)} MiB were sent before the migration, ${mib(streamedAt.to - streamedAt.from)} MiB ` +
        "during it, the rest to the target"
      );
    });
    await check("net-migration-link-kept", async () => {
      const mac = await converse(dest, "echo m=$(cat /sys/class/net/eth0/address)/", /^m=.*\/$/, 30_000);
      const carrier = await converse(dest, "echo c=$(cat /sys/class/net/eth0/carrier)/", /^c=.*\/$/, 30_000);
      if (mac.line !== `m=${NET_GUEST_MAC}/` || carrier.line !== "c=1/") {
        throw new Error(`on the target: ${mac.line} ${carrier.line}`);
      }
      const out = await guestPing(dest);
      const back = await hostPing(3);
      return `on the target eth0 ${NET_GUEST_MAC} carrier 1; guest -> host ${out}; host -> guest ${back}`;
    });
    await check("net-migration-tcp", async () => {
      const t = await download(dest);
      return `8 MiB host -> guest through ${TARGET_TAP} in ${t?.toFixed(2)} s`;
    });
    await check("net-migration-poweroff", async () => {
      await converse(dest, "echo ready", /^ready$/, 30_000);
      dest.writeSerial("poweroff\n");
      const ev = await within((target as TargetPeer).shutdown, 60_000, "power-off on the target");
      if (ev.reason !== "guest-exit" || ev.code !== 0) throw new Error(`expected guest-exit 0, got ${ev.reason}`);
      const errors = (target as TargetPeer).errors;
      if (errors.length > 0) throw new Error(`target errors: ${errors.join("; ")}`);
      return "guest-exit 0 on the target";
    });
  } finally {
    prober?.stop();
    await target?.stop();
    g?.vm.stop();
    servers?.http.close();
    servers?.sink.close();
    await netTeardown();
  }
}

/** The guest's view of its NICs, for a failure message. */
async function netLog(peer: ConsolePeer): Promise<string> {
  const from = peer.console.mark();
  try {
    await converse(peer, "ls /sys/class/net;dmesg|grep -i -e virtio -e net|tail -n 8;echo end", /^end$/, 30_000);
  } catch {
    // The message of the failing check is what matters; the log is a bonus.
  }
  return JSON.stringify(peer.console.text.slice(from).slice(-1200));
}
