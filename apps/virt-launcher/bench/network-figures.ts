/**
 * The pure part of `npm run bench -- network`: reading iperf3's JSON report, the ping-pong's round trips and the
 * migration prober's reply times, and shaping the figures into the table and the JSON line.
 *
 *   iperf3 -J (client side)     --parseIperf3-->   bits/s the receiver counted (end.sum_received), retransmits
 *   ping-pong round trips (us)  --rttStats----->   count, median, mean, p99
 *   one side's runs, alternated with the others' --medianRun--> the median of each figure
 *   echo reply times (ms)       --longestGap--->   the longest silence a client saw across the move
 *   /sys/class/net/eth0/device/features --featureNames--> the virtio-net features the guest's driver took
 *   the guest's /proc/net/dev eth0 line --guestFrames--> the average frame its driver handled each way (64 KiB
 *                                                       ones with segmentation offloads, MTU-sized ones without)
 */

/** What one iperf3 run measured. */
export interface Iperf3Result {
  /** What the receiving side counted, bits per second. */
  readonly bitsPerSecond: number;
  /** TCP retransmissions of the sending side, when iperf3 knows them (it does for the client's own sends). */
  readonly retransmits?: number;
  readonly seconds: number;
}

/** iperf3 reported an error, or its output is not an iperf3 JSON report; `message` says which. */
export class Iperf3Error extends Error {
  override name = "Iperf3Error";
}

interface Iperf3Sum {
  seconds?: unknown;
  bits_per_second?: unknown;
  retransmits?: unknown;
}

/** Reads `iperf3 -J`'s report (a whole JSON document). Throws Iperf3Error on an error report or a malformed one. */
export function parseIperf3(json: string): Iperf3Result {
  let report: { error?: unknown; end?: { sum_received?: Iperf3Sum; sum_sent?: Iperf3Sum } };
  try {
    report = JSON.parse(json) as typeof report;
  } catch (err) {
    throw new Iperf3Error(`iperf3's output is not JSON: ${JSON.stringify(json.slice(0, 200))}`, { cause: err });
  }
  if (typeof report.error === "string") throw new Iperf3Error(`iperf3: ${report.error}`);
  const received = report.end?.sum_received;
  const sent = report.end?.sum_sent;
  const bps = received?.bits_per_second;
  if (typeof bps !== "number" || !Number.isFinite(bps) || bps < 0)
    throw new Iperf3Error("iperf3's report has no end.sum_received.bits_per_second");
  const retransmits = sent?.retransmits;
  return {
    bitsPerSecond: bps,
    ...(typeof retransmits === "number" ? { retransmits } : {}),
    seconds: typeof received?.seconds === "number" ? received.seconds : 0,
  };
}

/** Gigabits per second (10^9 bits/s), four decimals (L1's figures are tens of Mbit/s). */
export function gbps(bitsPerSecond: number): number {
  return Math.round(bitsPerSecond / 1e5) / 1e4;
}

/** Round-trip statistics of a ping-pong, in microseconds. */
export interface RttStats {
  readonly count: number;
  readonly medianUs: number;
  readonly meanUs: number;
  readonly p99Us: number;
}

/** The statistics of round-trip samples (microseconds); throws a RangeError for no samples. */
export function rttStats(samplesUs: readonly number[]): RttStats {
  if (samplesUs.length === 0) throw new RangeError("no round trips were measured");
  const sorted = [...samplesUs].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
  const mean = sorted.reduce((s, x) => s + x, 0) / sorted.length;
  const r = (x: number): number => Math.round(x * 10) / 10;
  return { count: sorted.length, medianUs: r(median), meanUs: r(mean), p99Us: r(at(0.99)) };
}

/** The longest silence between replies: one home, in @kvt/migration (the nested lane's checks report it too). */
export { longestGap } from "@kvt/migration";

/** One side's figures as the JSON line reports them (tx: from the guest to the host; rx: into the guest). */
export interface SideFigures {
  readonly txGbps: number;
  readonly rxGbps: number;
  readonly rttUs: number;
}

/** A side's measurements before shaping. */
export interface SideRun {
  readonly tx: Iperf3Result;
  readonly rx: Iperf3Result;
  readonly rtt: RttStats;
}

/** The median of each figure over a side's runs (the rounds alternate the sides, so each median meets the same load). */
export function medianRun(runs: readonly SideRun[]): SideRun {
  if (runs.length === 0) throw new RangeError("no runs to take the median of");
  const median = (xs: readonly number[]): number => {
    const s = [...xs].sort((a, b) => a - b);
    const m = s.length >> 1;
    return s.length % 2 ? (s[m] ?? 0) : ((s[m - 1] ?? 0) + (s[m] ?? 0)) / 2;
  };
  const sum = (xs: readonly (number | undefined)[]): number | undefined =>
    xs.every((x) => x === undefined) ? undefined : xs.reduce<number>((a, x) => a + (x ?? 0), 0);
  const iperf = (pick: (r: SideRun) => Iperf3Result): Iperf3Result => {
    const retransmits = sum(runs.map((r) => pick(r).retransmits));
    return {
      bitsPerSecond: median(runs.map((r) => pick(r).bitsPerSecond)),
      seconds: median(runs.map((r) => pick(r).seconds)),
      ...(retransmits === undefined ? {} : { retransmits }),
    };
  };
  return {
    tx: iperf((r) => r.tx),
    rx: iperf((r) => r.rx),
    rtt: {
      count: runs.reduce((a, r) => a + r.rtt.count, 0),
      medianUs: median(runs.map((r) => r.rtt.medianUs)),
      meanUs: median(runs.map((r) => r.rtt.meanUs)),
      p99Us: median(runs.map((r) => r.rtt.p99Us)),
    },
  };
}

/** The JSON line's figures of one side. */
export function sideFigures(run: SideRun): SideFigures {
  return { txGbps: gbps(run.tx.bitsPerSecond), rxGbps: gbps(run.rx.bitsPerSecond), rttUs: run.rtt.medianUs };
}

/** The goals, judged (null: a figure is missing). */
export interface NetworkGoals {
  /** Ours >= QEMU's both ways. */
  readonly throughputVsQemu: boolean | null;
  /** Ours >= 50% of the veth limit both ways. */
  readonly throughputVsLimit: boolean | null;
  readonly rttVsQemu: boolean | null;
  /** Ours <= QEMU's and <= 100 ms. */
  readonly migrationOutage: boolean | null;
}

/** Judges the goals from the figures (pure). */
export function judgeGoals(
  ours: SideFigures | null,
  qemu: SideFigures | null,
  limit: SideFigures | null,
  outageMs: number | null,
  qemuOutageMs: number | null,
): NetworkGoals {
  const both = (a: SideFigures | null, b: SideFigures | null, share: number): boolean | null =>
    a && b ? a.txGbps >= b.txGbps * share && a.rxGbps >= b.rxGbps * share : null;
  return {
    throughputVsQemu: both(ours, qemu, 1),
    throughputVsLimit: both(ours, limit, 0.5),
    rttVsQemu: ours && qemu ? ours.rttUs <= qemu.rttUs : null,
    migrationOutage: outageMs === null || qemuOutageMs === null ? null : outageMs <= qemuOutageMs && outageMs <= 100,
  };
}

/** The figures table, one row per side (rows of unmeasured sides say so). */
export function figuresTable(rows: readonly [string, SideRun | null][]): string {
  const head = "side     guest->host Gbps  host->guest Gbps  rtt median us  mean us  p99 us  retransmits tx/rx";
  const lines = rows.map(([name, run]) => {
    if (!run) return `${name.padEnd(8)} (not measured)`;
    const f = sideFigures(run);
    const c = (v: number | string, w: number): string => String(v).padStart(w);
    return (
      `${name.padEnd(8)}${c(f.txGbps, 17)}${c(f.rxGbps, 18)}${c(f.rttUs, 15)}${c(run.rtt.meanUs, 9)}` +
      `${c(run.rtt.p99Us, 8)}  ${run.tx.retransmits ?? "-"}/${run.rx.retransmits ?? "-"}`
    );
  });
  return [head, ...lines].join("\n");
}

/** virtio-net feature bits by number (virtio spec 5.1.3, and the transport's 28, 29, 32). */
const NET_FEATURES: Readonly<Record<number, string>> = {
  0: "CSUM",
  1: "GUEST_CSUM",
  2: "CTRL_GUEST_OFFLOADS",
  3: "MTU",
  5: "MAC",
  7: "GUEST_TSO4",
  8: "GUEST_TSO6",
  9: "GUEST_ECN",
  10: "GUEST_UFO",
  11: "HOST_TSO4",
  12: "HOST_TSO6",
  13: "HOST_ECN",
  14: "HOST_UFO",
  15: "MRG_RXBUF",
  16: "STATUS",
  17: "CTRL_VQ",
  18: "CTRL_RX",
  19: "CTRL_VLAN",
  21: "GUEST_ANNOUNCE",
  22: "MQ",
  23: "CTRL_MAC_ADDR",
  28: "INDIRECT_DESC",
  29: "EVENT_IDX",
  32: "VERSION_1",
  33: "ACCESS_PLATFORM",
  34: "RING_PACKED",
  40: "NOTIFICATION_DATA",
};

/** The names of the bits set in a virtio `features` string as sysfs shows it (one 0/1 character a bit, bit 0 first). */
export function featureNames(bits: string): string[] {
  return [...bits].flatMap((b, i) => (b === "1" ? [NET_FEATURES[i] ?? `bit${i}`] : []));
}

/** The line the bench has the guest print: `KVT_NETDEV` and its /proc/net/dev line for eth0. */
export const NETDEV_LINE = /KVT_NETDEV\s+eth0:\s*(\d+)\s+(\d+)(?:\s+\d+){6}\s+(\d+)\s+(\d+)/;

/** The average bytes per frame the guest's driver received and sent, from a NETDEV_LINE match. */
export function guestFrames(m: RegExpMatchArray): { rxAvgBytes: number; txAvgBytes: number } {
  const [rxBytes, rxPackets, txBytes, txPackets] = m.slice(1, 5).map(Number);
  const avg = (bytes = 0, packets = 0): number => (packets > 0 ? Math.round(bytes / packets) : 0);
  return { rxAvgBytes: avg(rxBytes, rxPackets), txAvgBytes: avg(txBytes, txPackets) };
}
