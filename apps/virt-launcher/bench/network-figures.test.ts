import { describe, expect, it } from "vitest";
import {
  featureNames,
  figuresTable,
  gbps,
  guestFrames,
  Iperf3Error,
  judgeGoals,
  medianRun,
  NETDEV_LINE,
  parseIperf3,
  rttStats,
  sideFigures,
} from "./network-figures.ts";

/** The parts of an iperf3 3.12 `-J` client report the bench reads (a real report carries much more). */
const REPORT = JSON.stringify({
  start: { version: "iperf 3.12", test_start: { protocol: "TCP", duration: 5 } },
  intervals: [],
  end: {
    sum_sent: {
      start: 0,
      end: 5.000124,
      seconds: 5.000124,
      bytes: 81264640,
      bits_per_second: 130021815.1,
      retransmits: 7,
    },
    sum_received: { start: 0, end: 5.0402, seconds: 5.0402, bytes: 80871424, bits_per_second: 128362443.9 },
  },
});

describe("parseIperf3()", () => {
  it("reads what the receiver counted, the sender's retransmits and the duration", () => {
    expect(parseIperf3(REPORT)).toEqual({ bitsPerSecond: 128362443.9, retransmits: 7, seconds: 5.0402 });
  });

  it("leaves retransmits out when iperf3 has none to report", () => {
    const r = JSON.parse(REPORT) as { end: { sum_sent: { retransmits?: number } } };
    delete r.end.sum_sent.retransmits;
    expect(parseIperf3(JSON.stringify(r))).not.toHaveProperty("retransmits");
  });

  it.each([
    [
      "an error report",
      JSON.stringify({ start: {}, end: {}, error: "unable to connect to server: Connection refused" }),
      /iperf3: unable to connect/,
    ],
    ["output that is not JSON", "iperf3: error - unable to connect", /not JSON/],
    [
      "a report without the received sum",
      JSON.stringify({ end: { sum_sent: { bits_per_second: 1 } } }),
      /sum_received/,
    ],
    ["a negative rate", JSON.stringify({ end: { sum_received: { bits_per_second: -1 } } }), /sum_received/],
  ])("refuses %s with Iperf3Error", (_what, text, message) => {
    expect(() => parseIperf3(text)).toThrow(Iperf3Error);
    expect(() => parseIperf3(text)).toThrow(message);
  });
});

describe("gbps()", () => {
  it("gives Gbit/s with four decimals", () => {
    expect(gbps(128362443.9)).toBe(0.1284);
    expect(gbps(9.41e9)).toBe(9.41);
    expect(gbps(0)).toBe(0);
  });
});

describe("rttStats()", () => {
  it("gives the median (odd and even counts), mean and 99th percentile", () => {
    expect(rttStats([300, 100, 200])).toEqual({ count: 3, medianUs: 200, meanUs: 200, p99Us: 300 });
    const even = rttStats([10, 40, 20, 30]);
    expect(even.medianUs).toBe(25);
    expect(even.meanUs).toBe(25);
    const many = rttStats(Array.from({ length: 1000 }, (_, i) => i + 1));
    expect(many.p99Us).toBe(991);
  });

  it("refuses an empty run", () => {
    expect(() => rttStats([])).toThrow(RangeError);
  });
});

describe("judgeGoals() and the table", () => {
  const run = (tx: number, rx: number, rtt: number) => ({
    tx: { bitsPerSecond: tx * 1e9, seconds: 5 },
    rx: { bitsPerSecond: rx * 1e9, seconds: 5, retransmits: 2 },
    rtt: { count: 100, medianUs: rtt, meanUs: rtt + 1, p99Us: rtt * 2 },
  });

  it("judges throughput against QEMU and half the limit, the round trip, and the outage against both bounds", () => {
    const ours = sideFigures(run(1, 2, 100));
    const qemu = sideFigures(run(0.9, 2, 120));
    const limit = sideFigures(run(2, 4, 50));
    expect(judgeGoals(ours, qemu, limit, 80, 90)).toEqual({
      throughputVsQemu: true,
      throughputVsLimit: true,
      rttVsQemu: true,
      migrationOutage: true,
    });
    expect(judgeGoals(ours, sideFigures(run(0.9, 2.1, 90)), sideFigures(run(2.1, 4, 50)), 120, 200)).toEqual({
      throughputVsQemu: false,
      throughputVsLimit: false,
      rttVsQemu: false,
      migrationOutage: false, // within QEMU's, but over 100 ms
    });
    expect(judgeGoals(ours, null, null, null, 5)).toEqual({
      throughputVsQemu: null,
      throughputVsLimit: null,
      rttVsQemu: null,
      migrationOutage: null,
    });
  });

  it("prints one row per side, unmeasured ones marked", () => {
    const table = figuresTable([
      ["ours", run(0.0123, 0.1284, 512.5)],
      ["qemu", null],
    ]);
    const [head, ours, qemu] = table.split("\n");
    expect(head).toMatch(/^side +guest->host Gbps +host->guest Gbps +rtt median us/);
    expect(ours).toMatch(/^ours +0\.0123 +0\.1284 +512\.5 +513\.5 +1025 +-\/2$/);
    expect(qemu).toBe("qemu     (not measured)");
  });
});

describe("featureNames()", () => {
  it("names the bits sysfs shows set, bit 0 first, unknown ones by number", () => {
    const bits = "1000010000011000100000000000110010000000000000000000000000000000";
    expect(featureNames(bits)).toEqual([
      "CSUM",
      "MAC",
      "HOST_TSO4",
      "HOST_TSO6",
      "STATUS",
      "INDIRECT_DESC",
      "EVENT_IDX",
      "VERSION_1",
    ]);
    expect(featureNames("0000001")).toEqual(["bit6"]);
    expect(featureNames("")).toEqual([]);
  });
});

describe("guestFrames()", () => {
  it("averages the guest's eth0 counters from its /proc/net/dev line, ignoring the typed command's echo", () => {
    const console =
      "# echo KVT_NETDEV $(grep eth0: /proc/net/dev)\r\n" +
      "KVT_NETDEV eth0: 163840000 2500 0 0 0 0 0 0 3300000 50000 0 0 0 0 0 0\r\n";
    const m = console.match(NETDEV_LINE);
    expect(m).not.toBeNull();
    expect(guestFrames(m!)).toEqual({ rxAvgBytes: 65536, txAvgBytes: 66 });
    expect(guestFrames("KVT_NETDEV eth0: 0 0 0 0 0 0 0 0 0 0 0".match(NETDEV_LINE)!)).toEqual({
      rxAvgBytes: 0,
      txAvgBytes: 0,
    });
  });
});

describe("medianRun()", () => {
  const run = (tx: number, rx: number, rtt: number, retransmits?: number) => ({
    tx: { bitsPerSecond: tx, seconds: 5, ...(retransmits === undefined ? {} : { retransmits }) },
    rx: { bitsPerSecond: rx, seconds: 5 },
    rtt: { count: 100, medianUs: rtt, meanUs: rtt + 10, p99Us: rtt * 3 },
  });

  it("takes each figure's median over the rounds, sums retransmits and round trips", () => {
    const m = medianRun([run(3e8, 1e8, 900, 2), run(1e8, 9e8, 300, 1), run(2e8, 5e8, 2000, 0)]);
    expect(m.tx).toEqual({ bitsPerSecond: 2e8, seconds: 5, retransmits: 3 });
    expect(m.rx).toEqual({ bitsPerSecond: 5e8, seconds: 5 });
    expect(m.rtt).toEqual({ count: 300, medianUs: 900, meanUs: 910, p99Us: 2700 });
    expect(medianRun([run(1, 2, 10), run(3, 4, 20)]).tx.bitsPerSecond).toBe(2);
    expect(() => medianRun([])).toThrow(RangeError);
  });
});
