import { describe, expect, it } from "vitest";
import { ConvergencePolicy, type PolicyOptions, THROTTLE_INITIAL } from "./policy.ts";

const MiB = 2 ** 20;
const base: PolicyOptions = {
  bandwidthBytesPerSec: 0,
  maxDowntimeMs: 50,
  allowAutoConverge: false,
  completionTimeoutSec: 0,
  progressTimeoutSec: 0,
};

describe("ConvergencePolicy", () => {
  it("switches over once pending bytes / bandwidth fits the downtime budget", () => {
    const p = new ConvergencePolicy(base);
    p.observeTransfer(1000 * MiB, 1); // 1000 MiB/s
    expect(p.decide({ elapsedMs: 1000, pendingBytes: 100 * MiB, newDirtyBytes: 100 * MiB, intervalSec: 1 })).toEqual({
      kind: "iterate",
      throttlePercent: 0,
      expectedDowntimeMs: 100,
    });
    expect(p.decide({ elapsedMs: 1100, pendingBytes: 40 * MiB, newDirtyBytes: 40 * MiB, intervalSec: 0.05 })).toEqual({
      kind: "switch-over",
      expectedDowntimeMs: 40,
    });
  });

  it("within budget, spends up to two more rounds while the guest dirties less than half the link", () => {
    const p = new ConvergencePolicy({ ...base, maxDowntimeMs: 20 });
    p.observeTransfer(1000 * MiB, 1); // 1000 MiB/s; the guest dirties 50 MiB/s
    const sample = (pendingMiB: number) => ({
      elapsedMs: 100,
      pendingBytes: pendingMiB * MiB,
      newDirtyBytes: 5 * MiB,
      intervalSec: 0.1,
    });
    expect(p.decide(sample(15)).kind).toBe("iterate"); // 15 ms: within budget, but a round would leave ~0.75 ms
    expect(p.decide(sample(4)).kind).toBe("switch-over"); // 4 ms: under a quarter of the budget
    const q = new ConvergencePolicy({ ...base, maxDowntimeMs: 20 });
    q.observeTransfer(1000 * MiB, 1);
    expect([q.decide(sample(15)).kind, q.decide(sample(15)).kind, q.decide(sample(15)).kind]).toEqual([
      "iterate",
      "iterate",
      "switch-over",
    ]);
    const hot = new ConvergencePolicy({ ...base, maxDowntimeMs: 20 });
    hot.observeTransfer(1000 * MiB, 1);
    expect(hot.decide({ ...sample(15), newDirtyBytes: 60 * MiB }).kind).toBe("switch-over"); // 600 MiB/s: no gain
  });

  it("switches over at once when nothing is pending, even before any bandwidth is known", () => {
    const p = new ConvergencePolicy(base);
    expect(p.decide({ elapsedMs: 5, pendingBytes: 0, newDirtyBytes: 0, intervalSec: 0.005 }).kind).toBe("switch-over");
    expect(p.decide({ elapsedMs: 5, pendingBytes: 4096, newDirtyBytes: 0, intervalSec: 0.005 }).kind).toBe("iterate");
  });

  it("never counts more bandwidth than the cap", () => {
    const p = new ConvergencePolicy({ ...base, bandwidthBytesPerSec: 100 * MiB });
    p.observeTransfer(1000 * MiB, 1);
    expect(p.bandwidthBytesPerSec).toBe(100 * MiB);
    expect(p.expectedDowntimeMs(10 * MiB)).toBeCloseTo(100);
  });

  it("fails with a completion timeout once the resolved seconds are exceeded", () => {
    const p = new ConvergencePolicy({ ...base, completionTimeoutSec: 2 });
    p.observeTransfer(10 * MiB, 1);
    const d = p.decide({ elapsedMs: 2001, pendingBytes: 100 * MiB, newDirtyBytes: 1, intervalSec: 1 });
    expect(d).toEqual({ kind: "fail", reason: "completion timeout (2 s)" });
  });

  it("fails with a progress timeout when remaining bytes reach no new low", () => {
    const p = new ConvergencePolicy({ ...base, progressTimeoutSec: 1 });
    p.observeTransfer(10 * MiB, 1);
    const s = { pendingBytes: 50 * MiB, newDirtyBytes: 50 * MiB, intervalSec: 0.5 };
    expect(p.decide({ ...s, elapsedMs: 0 }).kind).toBe("iterate");
    expect(p.decide({ ...s, elapsedMs: 900 }).kind).toBe("iterate");
    expect(p.decide({ ...s, pendingBytes: 49 * MiB, elapsedMs: 1500 }).kind).toBe("iterate"); // a new low resets
    expect(p.decide({ ...s, elapsedMs: 2400 }).kind).toBe("iterate");
    expect(p.decide({ ...s, elapsedMs: 2600 })).toEqual({
      kind: "fail",
      reason: "progress timeout (no progress in 1 s)",
    });
  });

  it("throttles progressively when the guest dirties faster than half the link, only with auto-converge", () => {
    const run = (allow: boolean): number[] => {
      const p = new ConvergencePolicy({ ...base, allowAutoConverge: allow });
      p.observeTransfer(100 * MiB, 1);
      const out: number[] = [];
      for (let i = 0; i < 8; i++) {
        const d = p.decide({ elapsedMs: i * 100, pendingBytes: 90 * MiB, newDirtyBytes: 9 * MiB, intervalSec: 0.1 });
        out.push(d.kind === "iterate" ? d.throttlePercent : -1);
      }
      return out;
    };
    expect(run(false)).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
    expect(run(true)).toEqual([0, THROTTLE_INITIAL, 20, 30, 30, 40, 40, 50]);
  });

  it("does not throttle a guest the link outruns", () => {
    const p = new ConvergencePolicy({ ...base, allowAutoConverge: true });
    p.observeTransfer(100 * MiB, 1);
    for (let i = 0; i < 5; i++) {
      const d = p.decide({ elapsedMs: i * 100, pendingBytes: 90 * MiB, newDirtyBytes: 1 * MiB, intervalSec: 0.1 });
      expect(d.kind === "iterate" && d.throttlePercent).toBe(0);
    }
  });

  it("rejects a non-positive downtime budget", () => {
    expect(() => new ConvergencePolicy({ ...base, maxDowntimeMs: 0 })).toThrow(RangeError);
  });
});
