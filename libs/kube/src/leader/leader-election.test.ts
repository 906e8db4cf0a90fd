import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { ApiError } from "../errors.ts";
import type { Lease } from "../types.ts";
import { LeaderElector, microTime } from "./leader-election.ts";

/** An in-memory lease endpoint with resourceVersion conflicts, as the API server does. */
function leaseApi(): {
  get(ns: string, n: string): Promise<Lease>;
  create(l: Lease): Promise<Lease>;
  update(l: Lease): Promise<Lease>;
  current(): Lease | undefined;
} {
  let stored: Lease | undefined;
  let rv = 0;
  const copy = (l: Lease): Lease => structuredClone(l);
  return {
    get: async () => {
      if (!stored) throw new ApiError("not found", 404, { code: 404, reason: "NotFound" });
      return copy(stored);
    },
    create: async (l) => {
      if (stored) throw new ApiError("exists", 409, { code: 409, reason: "AlreadyExists" });
      stored = { ...copy(l), metadata: { ...l.metadata, resourceVersion: String(++rv) } };
      return copy(stored);
    },
    update: async (l) => {
      if (!stored || l.metadata?.resourceVersion !== stored.metadata?.resourceVersion) {
        throw new ApiError("conflict", 409, { code: 409, reason: "Conflict" });
      }
      stored = { ...copy(l), metadata: { ...l.metadata, resourceVersion: String(++rv) } };
      return copy(stored);
    },
    current: () => stored,
  };
}

const timing = { leaseDurationMs: 300, renewDeadlineMs: 200, retryPeriodMs: 40 };
const until = async (cond: () => boolean): Promise<void> => {
  const deadline = Date.now() + 5000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error("condition not met");
    await new Promise((r) => setTimeout(r, 10));
  }
};

describe("microTime", () => {
  it("has six fractional digits", () => {
    expect(microTime(new Date(Date.UTC(2026, 10, 26, 16, 21, 13, 485)))).toBe("2026-11-26T16:21:13.485000Z");
    expect(microTime(new Date(Date.UTC(2026, 0, 2, 3, 4, 5, 0)))).toBe("2026-01-02T03:04:05.000000Z");
  });
});

describe("LeaderElector", () => {
  it("one of two candidates leads; the standby takes over when the leader releases", async () => {
    const leases = leaseApi();
    const logger = pino({ level: "silent" });
    const leading: string[] = [];
    const mk = (identity: string) =>
      new LeaderElector({
        leases,
        namespace: "kubevirt",
        name: "virt-controller",
        identity,
        logger,
        ...timing,
        onStartedLeading: () => leading.push(identity),
      });
    const a = mk("a");
    const b = mk("b");
    const stopA = new AbortController();
    const stopB = new AbortController();
    const runA = a.run(stopA.signal);
    await until(() => a.isLeader);
    const runB = b.run(stopB.signal);
    await new Promise((r) => setTimeout(r, 100));
    expect(b.isLeader).toBe(false);
    expect(b.leader).toBe("a");
    stopA.abort();
    await runA;
    expect(leases.current()?.spec?.holderIdentity).toBe("");
    await until(() => b.isLeader);
    expect(leading).toEqual(["a", "b"]);
    expect(leases.current()?.spec?.leaseTransitions).toBe(1);
    // MicroTimes as kube-apiserver parses them (RFC3339Micro), not toISOString()'s milliseconds.
    expect(leases.current()?.spec?.renewTime).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
    expect(leases.current()?.spec?.acquireTime).toMatch(/\.\d{6}Z$/);
    stopB.abort();
    await runB;
  });

  it("a standby takes over an expired lease whose holder died without releasing", async () => {
    const leases = leaseApi();
    await leases.create({
      metadata: { name: "virt-controller", namespace: "kubevirt" },
      spec: { holderIdentity: "dead", leaseDurationSeconds: 0, renewTime: new Date().toISOString() },
    });
    const b = new LeaderElector({
      leases,
      namespace: "kubevirt",
      name: "virt-controller",
      identity: "b",
      logger: pino({ level: "silent" }),
      ...timing,
      onStartedLeading: () => {},
    });
    const stop = new AbortController();
    const run = b.run(stop.signal);
    await until(() => b.isLeader);
    stop.abort();
    await run;
  });

  it("steps down (aborting the leading signal) when it cannot renew", async () => {
    const leases = leaseApi();
    let signal: AbortSignal | undefined;
    let stopped = false;
    const a = new LeaderElector({
      leases,
      namespace: "kubevirt",
      name: "l",
      identity: "a",
      logger: pino({ level: "silent" }),
      ...timing,
      onStartedLeading: (s) => (signal = s),
      onStoppedLeading: () => (stopped = true),
    });
    const stop = new AbortController();
    const run = a.run(stop.signal);
    await until(() => a.isLeader);
    // Someone else steals the lease.
    const cur = leases.current()!;
    await leases.update({
      ...cur,
      spec: { ...cur.spec, holderIdentity: "thief", renewTime: new Date().toISOString(), leaseDurationSeconds: 60 },
    });
    await until(() => stopped);
    expect(signal?.aborted).toBe(true);
    expect(a.isLeader).toBe(false);
    stop.abort();
    await run;
  });
});
