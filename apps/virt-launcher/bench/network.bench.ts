/**
 * `npm run bench -- network`: the guest's network through KubeVirt's masquerade binding, on our VMM and on QEMU
 * (-accel kvm, the same binding), side by side in one run (inside the nested lane's L1 where this host's KVM cannot
 * run Linux), against two network namespaces joined by a veth pair as the limit; then the TCP outage a client of the
 * guest's Service sees while the guest live-migrates to another pod, on each VMM. Root only (namespaces, nftables).
 *
 *   host (L1)                           pod A (node-a)                                  guest (demo image)
 *   kvt-<tag> bridge 10.N.0.1/16  ─veth─ eth0 10.N.1.x ── nft NAT ── k6t-eth0 10.0.2.1 ── tap0 ── eth0 10.0.2.2 (DHCP)
 *     iperf3 -c / -c -R  ─────────────────────────────────────────────────────────────────> iperf3 -s
 *     ping-pong (network-pingpong.ts) ────────────────────────────────────────────────────> nc -ll -e cat :7000
 *     Service 10.N+64.0.10:17000 ─(the local cluster's service rules)─> pod A :7000, after the move pod B :7000
 *   limit: netns kvtnb-<tag>-a 192.0.2.1/30 ─veth─ netns kvtnb-<tag>-b 192.0.2.2/30 (iperf3 -s, busybox nc -e cat)
 *
 * Everything is the project's own code: the pod network, the pods' namespaces (the real CNI plugins) and the Service
 * rules with their conntrack clean-up are the local cluster's (tools/local-cluster network/ and proxy/), the binding
 * and the machines are the launcher's (network-pod.ts runs them in each pod). tx = guest -> host, rx = host -> guest;
 * rttUs = the median round trip of a 64-byte TCP ping-pong (not ICMP). The outage is the longest silence of a
 * connection to the Service carrying a numbered line every 20 ms, from a second before the migration to 50 replies
 * after it; the Service's endpoint moves to the target pod (nft table rewritten, the old pod's flows cleared) the
 * moment the source reports the migration done. Everything made (namespaces, bridge, nft tables, processes) is
 * removed at the end, on failure and on SIGINT/SIGTERM.
 *
 * Last line: {"area":"network","lane":..,"ours":{"txGbps":..,"rxGbps":..,"rttUs":..},"qemu":{..},"limit":{..},
 *             "migrationOutageMs":..,"qemuMigrationOutageMs":..,...}
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { VirtualMachineInstance } from "@kvt/api";
import {
  createPodNetwork,
  PodNetwork,
  type PodNetworkConfig,
  type ProxyNetwork,
  proxyNetworkOf,
  removePodNetwork,
  renderRuleset,
  runConntrack,
  runNft,
  type ServicePortRoute,
  serviceRoutes,
  staleFlows,
} from "@kvt/local-cluster";
import { conntrackDeleter, type MasqueradePlan, planMasquerade } from "@kvt/pod-network";
import { benchLane, kvmRunsLinux } from "@kvt/vmm";
import type { MachineSpec, MigrationResult } from "../src/machine/machine.ts";
import { migrationTlsPair } from "../src/machine/migration-tls.test-util.ts";
import { imageStoreResolver } from "../src/vmi/image-store.ts";
import { buildNoCloudDisk } from "../src/volumes/cloud-init-disks.ts";
import {
  featureNames,
  figuresTable,
  guestFrames,
  judgeGoals,
  longestGap,
  medianRun,
  NETDEV_LINE,
  type SideFigures,
  type SideRun,
  sideFigures,
} from "./network-figures.ts";
import {
  ECHO_PORT,
  Leftovers,
  type MeasureOptions,
  measure,
  PROBE_MS,
  startLimit,
  startProber,
  until,
  type VethLimit,
} from "./network-measure.ts";
import type { NetworkPodConfig } from "./network-pod.ts";
import { PodPeer } from "./network-pod-peer.ts";

const USAGE = `usage: npm run bench -- network [--seconds N] [--rtt-seconds N] [--rounds N] [--only SIDE]...
                                [--no-migration] [--plain-migration]

Measures, through KubeVirt's masquerade binding (the launcher's wiring in a real pod network), guest -> host and
host -> guest TCP throughput (iperf3) and the round trip of a TCP ping-pong, on our VMM and on QEMU (-accel kvm), and
the same between two network namespaces (veth) as the limit; then, on each VMM, the longest silence of a TCP
connection through a Service while the guest live-migrates. Runs inside the nested lane's L1 where this host's KVM
cannot run Linux (--host keeps it here). Root only.
  --seconds N       iperf3 run length per direction (default 5)
  --rtt-seconds N   ping-pong length (default 3; after 20 warm-up round trips)
  --rounds N        measure every side N times, alternating them, and report the medians (default 3)
  --only SIDE       ours, ours-user, qemu or limit; repeat it for more than one (default all four; L1 takes no
                    commas). ours: our VMM's default data path (vhost-net where /dev/vhost-net opens, as QEMU's);
                    ours-user: our VMM's userspace path (vhost off), measured in the same rounds, not migrated
  --no-migration    skip the live migrations (the outages are then null)
  --plain-migration move the guests over a plain stream (KubeVirt's migrations.disableTLS) instead of TLS
  -h, --help        this text`;

const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "5" },
    "rtt-seconds": { type: "string", default: "3" },
    only: { type: "string", multiple: true, default: ["ours", "ours-user", "qemu", "limit"] },
    "no-migration": { type: "boolean", default: false },
    "plain-migration": { type: "boolean", default: false },
    rounds: { type: "string", default: "3" },
    host: { type: "boolean", default: false },
    nested: { type: "boolean", default: false },
    help: { type: "boolean", short: "h", default: false },
  },
});
if (values.help) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}
const SIDES = new Set(values.only.flatMap((o) => o.split(",")).map((s) => s.trim()));
for (const s of SIDES) {
  if (!["ours", "ours-user", "qemu", "limit"].includes(s)) {
    process.stderr.write(`--only: unknown side "${s}" (ours, ours-user, qemu, limit)\n${USAGE}\n`);
    process.exit(2);
  }
}
const say = (line: string): void => void process.stdout.write(`network: ${line}\n`);
const OPTIONS: MeasureOptions = {
  seconds: Math.max(1, Math.round(Number(values.seconds) || 5)),
  rttSeconds: Math.max(1, Number(values["rtt-seconds"]) || 3),
  say,
};
const MIGRATE = !values["no-migration"];
const PLAIN_MIGRATION = values["plain-migration"];
const ROUNDS = Math.max(1, Math.round(Number(values.rounds) || 3));
const root = new URL("../../../", import.meta.url).pathname;
const lane = benchLane();
const GUEST_MEMORY = 256 * 2 ** 20;
const BOOT_TIMEOUT_MS = 600_000;
const SERVICE_PORT = 17000;
const RTT_METHOD = "TCP ping-pong, 64-byte lines, against busybox nc -ll -e cat (median round trip)";

/**
 * The guest's user data: a DHCP lease on eth0 (busybox udhcpc), iperf3's server, a line echo server on ECHO_PORT,
 * then one line with its address and the virtio-net features the driver negotiated (/sys .../features, bit 0 first).
 */
const USER_DATA = `#!/bin/sh
cat >/tmp/lease.sh <<'EOS'
#!/bin/sh
[ "$1" = bound ] || exit 0
ip addr add "$ip/$mask" dev "$interface"
[ -n "$router" ] && ip route add default via "$router"
EOS
chmod +x /tmp/lease.sh
ip link set lo up
ip link set eth0 up
udhcpc -i eth0 -s /tmp/lease.sh -q -n -t 30 -T 1 >/dev/null 2>&1
iperf3 -s -D
setsid nc -ll -p ${ECHO_PORT} -e cat </dev/null >/dev/null 2>&1 &
for i in $(seq 100); do netstat -ltn | grep -q ':5201 ' && netstat -ltn | grep -q ':${ECHO_PORT} ' && break; usleep 100000; done
echo "KVT_NET_READY $(ip -4 -o addr show dev eth0 | tr -s ' ' | cut -d' ' -f4) features=$(cat /sys/class/net/eth0/device/features)"
`;

/** Everything this run made that must go, whatever happens: children, namespaces, the pod network, pods. */
const left = new Leftovers();
const made = { dir: "", network: undefined as PodNetworkConfig | undefined, pods: new Set<PodPeer>() };

async function cleanup(): Promise<void> {
  for (const p of made.pods) p.kill();
  left.removeAll();
  // The pod network's removal also kills what is left in its namespaces (a pod's QEMU child).
  if (made.network) await removePodNetwork(made.network).catch((e: unknown) => say(`cleanup: ${String(e)}`));
  made.network = undefined;
  if (made.dir) rmSync(made.dir, { recursive: true, force: true });
}

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    say(`${signal}: removing the namespaces, bridge, nft tables and processes`);
    void cleanup().finally(() => process.exit(130));
  });
}

/** A VMI with the pod network on KubeVirt's masquerade binding (what planMasquerade reads). */
function benchVmi(name: string): VirtualMachineInstance {
  return {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachineInstance",
    metadata: { name, namespace: "bench", uid: randomUUID() },
    spec: {
      domain: { devices: { interfaces: [{ name: "default", masquerade: {} }] } },
      networks: [{ name: "default", pod: {} }],
    },
  };
}

/** A launcher pod: its namespace on `node` (the CNI plugins), and the pod process in it. */
async function startPod(
  net: PodNetworkConfig,
  node: string,
  name: string,
  config: Omit<NetworkPodConfig, "podIp">,
): Promise<{ pod: PodPeer; ip: string }> {
  const sandbox = await new PodNetwork(net, node).attach({ uid: randomUUID(), namespace: "bench", name });
  const ip = sandbox.ips[0];
  if (!ip) throw new Error(`pod ${name} got no IPv4 address`);
  const pod = PodPeer.start(name, sandbox.netnsPath, { ...config, podIp: ip });
  made.pods.add(pod);
  await pod.next("wired", 300_000);
  return { pod, ip };
}

/** What a side's live migration showed (ms unless named otherwise). */
interface MoveFigures {
  readonly outageMs: number;
  /** The VMM's: the guest paused on the source until it ran on the target. */
  readonly downtimeMs: number | null;
  readonly totalSeconds: number;
  /** From the source's report to the Service pointing at the target (nft table, conntrack -D of UDP, then of the
   * old pod address's flows). */
  readonly endpointSwitchMs: number;
  /** Where the silence fell: from its start to the source's report, and to the Service's switch. */
  readonly silenceToReportMs: number;
  readonly silenceToSwitchMs: number;
  readonly replies: number;
}

/** The Service's routes with its one endpoint at `podIp` (the local cluster's service rules, pure). */
function routesTo(net: ProxyNetwork, clusterIP: string, podIp: string): ServicePortRoute[] {
  const ports = [{ name: "echo", port: SERVICE_PORT, protocol: "TCP" }];
  const endpoints = [{ addresses: [podIp], ready: true, serving: true, terminating: false }];
  return serviceRoutes(
    net,
    [{ namespace: "bench", name: "net-echo", clusterIP, ports }],
    [{ namespace: "bench", serviceName: "net-echo", ports: [{ ...ports[0], port: ECHO_PORT }], endpoints }],
  );
}

/**
 * Points the Service at `podIp` as the local cluster's proxy does when the EndpointSlice changes: the table first,
 * then the flows the old endpoint served are cleared, so a connection's next segment is DNATed to the new one.
 */
async function pointService(net: ProxyNetwork, routes: ServicePortRoute[], before?: ServicePortRoute[]): Promise<void> {
  await runNft(renderRuleset(net, routes));
  for (const flows of before ? staleFlows(before, routes) : []) await runConntrack(flows);
}

/** virt-handler's deleter of the flows a migrated VMI's old pod address still holds (the bench's namespace). */
const clearMigratedFlows = conntrackDeleter();

/** Moves the guest of `source` to a new pod on node-b while a client of its Service talks to it. */
async function migrate(
  net: PodNetworkConfig,
  label: string,
  source: { pod: PodPeer; ip: string },
  config: Omit<NetworkPodConfig, "podIp" | "role">,
): Promise<MoveFigures> {
  const proxy = proxyNetworkOf(net);
  if (!proxy) throw new Error("the pod network has no Service range");
  const clusterIP = proxy.serviceCidr.replace(/\.0\/16$/, ".10");
  const before = routesTo(proxy, clusterIP, source.ip);
  await pointService(proxy, before);
  const probe = await startProber(left, clusterIP, SERVICE_PORT);
  try {
    await until(
      () => probe.replies.length >= 10 || probe.failure() !== undefined,
      "replies through the Service",
      60_000,
    );
    const name = `virt-launcher-net-${label}-b`;
    // The handlers' part: both launchers' certificates, exchanged (none with --plain-migration: disableTLS).
    const tls = PLAIN_MIGRATION ? undefined : await migrationTlsPair();
    const migrationTls = tls && { identity: tls.target, sourceCertificate: tls.source.certificate };
    const target = await startPod(net, "node-b", name, {
      ...config,
      role: "target",
      ...(migrationTls ? { migrationTls } : {}),
    });
    const where = (await target.pod.next("listening", 300_000)).target;
    if (!where) throw new Error("the target pod reported no address");
    say(`${label}: migrating to ${name} (${target.ip}) while a client of ${clusterIP}:${SERVICE_PORT} talks`);
    const from = performance.now();
    const result: MigrationResult = await source.pod.migrate(where, 900_000, tls?.source);
    const reported = performance.now();
    if (!result.ok) throw new Error(`the migration failed: ${result.failureReason}`);
    // The source pod ends and leaves the EndpointSlice: the Service now names the target pod. The proxy clears UDP
    // flows only, as kube-proxy; the TCP flow still pinned to the old pod address is virt-handler's to clear
    // (--clear-migrated-flows, its first pass at once: apps/virt-handler/src/network/migrated-flows.ts).
    await pointService(proxy, routesTo(proxy, clusterIP, target.ip), before);
    await clearMigratedFlows({ replySource: source.ip });
    const switched = performance.now();
    await target.pod.next("running", 120_000);
    const seen = probe.replies.length;
    await until(() => probe.replies.length >= seen + 50 || probe.failure() !== undefined, "50 replies after", 60_000);
    const failure = probe.failure();
    if (failure) throw new Error(`the connection through the Service broke: ${failure}`);
    const gap = longestGap(probe.replies, from - 1000, performance.now());
    await target.pod.stop();
    return {
      outageMs: Math.round(gap.ms),
      downtimeMs: result.downtimeMs === undefined ? null : Math.round(result.downtimeMs * 10) / 10,
      totalSeconds: Math.round(result.totalSeconds * 100) / 100,
      endpointSwitchMs: Math.round(switched - reported),
      silenceToReportMs: Math.round(reported - gap.startMs),
      silenceToSwitchMs: Math.round(switched - gap.startMs),
      replies: probe.replies.length,
    };
  } finally {
    probe.stop();
  }
}

/** A VMM side: ours (its default data path), ours with vhost-net off, QEMU. */
type VmmLabel = "ours" | "ours-user" | "qemu";

/** One VMM's guest, booted behind the binding in its source pod. */
interface BootedSide {
  readonly label: VmmLabel;
  readonly vhost: "off" | "auto";
  /** What carried the frames (network-pod.ts: a vhost worker the pod's VMM owns, or none). */
  readonly dataPath: "vhost-net" | "userspace";
  readonly backend: NetworkPodConfig["backend"];
  readonly source: { pod: PodPeer; ip: string };
  readonly plan: MasqueradePlan;
  /** The machine spec of a pod of this side (`role` names its work directory). */
  spec(role: string): MachineSpec;
  /** The virtio-net features the guest's driver negotiated (sysfs bits). */
  readonly features: string;
}

/** One VMM's figures. */
interface SideResult {
  /** Each figure's median over the rounds. */
  readonly run: SideRun;
  readonly rounds: readonly SideRun[];
  readonly move: MoveFigures | null;
  readonly features: string;
  /** The average frame the guest's driver handled each way over all rounds (its /proc/net/dev). */
  readonly frames: { rxAvgBytes: number; txAvgBytes: number };
  readonly dataPath: "vhost-net" | "userspace";
}

/** Boots one VMM's guest in a launcher pod on node-a and waits until its servers listen. */
async function bootSide(net: PodNetworkConfig, label: VmmLabel): Promise<BootedSide> {
  const backend = label === "qemu" ? "qemu" : "native";
  const vhost = label === "ours-user" ? "off" : "auto";
  const vmi = benchVmi(`net-${label}`);
  const plan = planMasquerade(vmi);
  if (!plan) throw new Error("the bench VMI has no masquerade plan");
  const iso = join(made.dir, `${label}-cloudinit.iso`);
  const identity = { name: vmi.metadata?.name ?? "", namespace: "bench", firmwareUuid: randomUUID() };
  writeFileSync(iso, buildNoCloudDisk({ userData: USER_DATA }, identity, { timestamp: new Date(0) }));
  const boot = imageStoreResolver(process.env.KVT_IMAGE_STORE ?? join(root, ".data/images"))("local/demo-linux:latest");
  const spec = (role: string): MachineSpec => ({
    vmiKey: `bench/${vmi.metadata?.name}`,
    memoryBytes: GUEST_MEMORY,
    vcpus: 1,
    boot,
    disks: [{ name: "cloudinitdisk", path: iso, readOnly: true, kind: "cloudInitNoCloud", shared: true }],
    workDir: join(made.dir, `${label}-${role}`),
  });
  const t0 = performance.now();
  say(`${label}: starting a launcher pod on node-a (${backend === "native" ? "our VMM" : "QEMU -accel kvm"})`);
  const name = `virt-launcher-net-${label}-a`;
  const source = await startPod(net, "node-a", name, { backend, role: "source", spec: spec("a"), plan, vhost });
  await source.pod.next("running", 300_000);
  const ready = await source.pod.waitConsole(/KVT_NET_READY (\S+) features=([01]*)/, BOOT_TIMEOUT_MS);
  const upS = ((performance.now() - t0) / 1000).toFixed(1);
  const dataPath = await source.pod.dataPath();
  say(`${label}: guest up as ${ready[1]} behind pod IP ${source.ip} after ${upS} s; data path ${dataPath}`);
  return { label, vhost, dataPath, backend, source, plan, spec, features: ready[2] ?? "" };
}

/** The guest's average frame each way so far (it prints its eth0 counters on the console). */
async function framesOf(side: BootedSide): Promise<SideResult["frames"]> {
  side.source.pod.type("echo KVT_NETDEV $(grep eth0: /proc/net/dev)\n");
  const frames = guestFrames(await side.source.pod.waitConsole(NETDEV_LINE, 120_000));
  say(`${side.label}: the guest's average frame: ${frames.rxAvgBytes} B received, ${frames.txAvgBytes} B sent`);
  return frames;
}

/**
 * ROUNDS rounds over every side (the order reversed every other round), so that each side's median meets the same
 * load: L1 is one emulated CPU on a shared host, and a side measured alone in a busy minute reads several times
 * slower than in a quiet one.
 */
async function rounds(
  targets: readonly { name: string; server: string; netns?: string }[],
): Promise<Map<string, SideRun[]>> {
  const runs = new Map(targets.map((t) => [t.name, [] as SideRun[]]));
  for (let r = 1; r <= ROUNDS; r++) {
    const order = r % 2 ? targets : [...targets].reverse();
    for (const t of order) {
      runs.get(t.name)?.push(await measure(left, OPTIONS, `${t.name} (round ${r}/${ROUNDS})`, t.server, t.netns));
    }
  }
  return runs;
}

/** One side's line figures and outage, or nulls. */
function summary(r: SideResult | null): { figures: SideFigures | null; outageMs: number | null; features: string } {
  if (!r) return { figures: null, outageMs: null, features: "-" };
  return {
    figures: sideFigures(r.run),
    outageMs: r.move?.outageMs ?? null,
    features: featureNames(r.features).join(" ") || "-",
  };
}

/** The table's text: the figures, each round's, the features, frames and outages. */
function reportText(sides: Partial<Record<VmmLabel, SideResult>>, limRun: SideRun | null, lim: SideRun[] | null) {
  const [ours, qemu, user] = [sides.ours ?? null, sides.qemu ?? null, sides["ours-user"] ?? null];
  const [o, q] = [summary(ours), summary(qemu)];
  const perRound = (runs: readonly SideRun[] | null | undefined): SideFigures[] | null =>
    runs?.map(sideFigures) ?? null;
  const row = (name: string, r: SideResult | null): [string, SideRun | null] => [
    `${name} (${r?.dataPath ?? "-"})`,
    r?.run ?? null,
  ];
  const table = figuresTable([row("ours", ours), row("ours", user), row("qemu", qemu), ["limit", limRun]]);
  const rounds = {
    ours: perRound(ours?.rounds),
    oursUserspace: perRound(user?.rounds),
    qemu: perRound(qemu?.rounds),
    limit: perRound(lim),
  };
  return (
    `\nnetwork bench (${lane} lane; guest 1 vCPU ${GUEST_MEMORY / 2 ** 20} MiB, masquerade binding; iperf3 ` +
    `${OPTIONS.seconds} s a direction; medians of ${ROUNDS} alternated rounds; Gbps = 10^9 bit/s)\n${table}\n` +
    `per round: ${JSON.stringify(rounds)}\n` +
    `virtio-net features the guest negotiated: ours ${o.features}; qemu ${q.features}\n` +
    `the guest's average frame (received/sent, bytes): ours ${JSON.stringify(ours?.frames ?? null)}, qemu ` +
    `${JSON.stringify(qemu?.frames ?? null)}\n` +
    `migration outage through a Service (longest silence, a line every ${PROBE_MS} ms): ours ${o.outageMs} ms ` +
    `${JSON.stringify(ours?.move ?? null)}, qemu ${q.outageMs} ms ${JSON.stringify(qemu?.move ?? null)}\n`
  );
}

/**
 * Our two data paths side by side in the same rounds (the default is kept only where it is the faster), and which
 * one each side ran.
 */
function dataPaths(sides: Partial<Record<VmmLabel, SideResult>>, o: SideFigures | null, u: SideFigures | null) {
  const ratio = (a: number | undefined, b: number | undefined): number | null =>
    a && b ? Math.round((a / b) * 100) / 100 : null;
  const path = (label: VmmLabel): string | null => sides[label]?.dataPath ?? null;
  return {
    oursUserspace: u,
    dataPath: { ours: path("ours"), oursUserspace: path("ours-user"), qemu: path("qemu") },
    oursVsUserspace: {
      tx: ratio(o?.txGbps, u?.txGbps),
      rx: ratio(o?.rxGbps, u?.rxGbps),
      rttUserspaceOverOurs: ratio(u?.rttUs, o?.rttUs),
    },
  };
}

/** Prints the table and, last, the JSON line. */
function report(sides: Partial<Record<VmmLabel, SideResult>>, lim: SideRun[] | null, skipped: string[]): void {
  const [ours, qemu, user] = [sides.ours ?? null, sides.qemu ?? null, sides["ours-user"] ?? null];
  const [o, q, u] = [summary(ours), summary(qemu), summary(user)];
  const limRun = lim ? medianRun(lim) : null;
  const l = limRun ? sideFigures(limRun) : null;
  const moves = { ours: ours?.move ?? null, qemu: qemu?.move ?? null };
  process.stdout.write(reportText(sides, limRun, lim));
  process.stdout.write(
    `${JSON.stringify({
      area: "network",
      lane,
      ours: o.figures,
      qemu: q.figures,
      limit: l,
      ...dataPaths(sides, o.figures, u.figures),
      migrationOutageMs: o.outageMs,
      qemuMigrationOutageMs: q.outageMs,
      seconds: OPTIONS.seconds,
      rounds: ROUNDS,
      rtt: RTT_METHOD,
      migration: { ...moves, tls: !PLAIN_MIGRATION },
      guestFrames: { ours: ours?.frames ?? null, qemu: qemu?.frames ?? null },
      goals: judgeGoals(o.figures, q.figures, l, o.outageMs, q.outageMs),
      ...(skipped.length ? { skipped: skipped.join("; ") } : {}),
    })}\n`,
  );
}

/** The limit as a measuring target: its server, measured from its first namespace. */
function limitTarget(limit: VethLimit): { name: string; server: string; netns: string } {
  return { name: "limit", server: limit.server, netns: limit.clientNetns };
}

/** Boots the selected VMMs' guests, measures every side in rounds, then moves each guest. */
async function measureVmms(labels: readonly VmmLabel[], limit: VethLimit | undefined) {
  const results: Partial<Record<VmmLabel, SideResult>> = {};
  say("creating the pod network (the local cluster's: bridge, CNI, Service rules)");
  const net = await createPodNetwork(join(made.dir, "cluster"), ["node-a", "node-b"], say);
  made.network = net;
  const booted: BootedSide[] = [];
  for (const label of labels) booted.push(await bootSide(net, label));
  const runs = await rounds([
    ...booted.map((b) => ({ name: b.label, server: b.source.ip })),
    ...(limit ? [limitTarget(limit)] : []),
  ]);
  limit?.stop();
  for (const b of booted) {
    const frames = await framesOf(b);
    const config = { backend: b.backend, spec: b.spec("b"), plan: b.plan, vhost: b.vhost };
    const move = MIGRATE && b.label !== "ours-user" ? await migrate(net, b.label, b.source, config) : null;
    if (move) say(`${b.label}: migration outage ${move.outageMs} ms (downtime ${move.downtimeMs} ms)`);
    await b.source.pod.stop();
    const mine = runs.get(b.label) ?? [];
    results[b.label] = { run: medianRun(mine), rounds: mine, move, features: b.features, frames, dataPath: b.dataPath };
  }
  return { results, limitRuns: limit ? (runs.get("limit") ?? null) : null };
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error("the network bench needs root (network namespaces, nftables)");
  made.dir = mkdtempSync(join(tmpdir(), "kvt-net-bench-"));
  const limit = SIDES.has("limit") ? await startLimit(left) : undefined;
  const vmms = (["ours", "ours-user", "qemu"] as const).filter((s) => SIDES.has(s));
  const skipped: string[] = [];
  if (vmms.length > 0 && !kvmRunsLinux()) {
    skipped.push("this host's KVM cannot run Linux guests (run the bench without --host)");
  }
  let results: Partial<Record<VmmLabel, SideResult>> = {};
  let limitRuns: SideRun[] | null = null;
  if (vmms.length > 0 && skipped.length === 0) ({ results, limitRuns } = await measureVmms(vmms, limit));
  else if (limit) limitRuns = (await rounds([limitTarget(limit)])).get("limit") ?? null;
  limit?.stop();
  report(results, limitRuns, skipped);
}

try {
  await main();
} catch (err) {
  say(`failed: ${(err as Error).stack ?? String(err)}`);
  await cleanup();
  process.stdout.write(`${JSON.stringify({ area: "network", lane, error: (err as Error).message })}\n`);
  process.exit(1);
}
await cleanup();
