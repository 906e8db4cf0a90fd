/** When a migration moved a VMI's pod address (pure), and the deletion passes that follow (a recording deleter). */
import type { VirtualMachineInstance } from "@kvt/api";
import type { ConntrackFlows } from "@kvt/pod-network";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { AddressMoves, MigratedFlows, nodeConntrackDeleter, podAddresses } from "./migrated-flows.ts";

type MigrationState = NonNullable<NonNullable<VirtualMachineInstance["status"]>["migrationState"]>;

function vmi(ip: string | undefined, migration?: Partial<MigrationState>, uid = "vmi-1"): VirtualMachineInstance {
  return {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachineInstance",
    metadata: { name: "web", namespace: "default", uid },
    spec: { domain: { devices: {} } },
    status: {
      phase: "Running",
      ...(ip ? { interfaces: [{ name: "default", ipAddress: ip, ipAddresses: [ip] }] } : {}),
      ...(migration ? { migrationState: { migrationUid: "mig-1", ...migration } } : {}),
    },
  };
}

describe("podAddresses", () => {
  it("lists each IPv4 address of the interfaces once, sorted", () => {
    const v = vmi("10.70.1.5");
    v.status!.interfaces!.push({ name: "second", ipAddress: "10.70.1.9", ipAddresses: ["10.70.1.9", "fd00::9"] });
    expect(podAddresses(v)).toEqual(["10.70.1.5", "10.70.1.9"]);
    expect(podAddresses(vmi(undefined))).toEqual([]);
  });
});

describe("AddressMoves", () => {
  it("tells the source's address once the migration completed and the target reported its own", () => {
    const moves = new AddressMoves();
    expect(moves.observe(vmi("10.70.1.5"))).toBeUndefined();
    expect(moves.observe(vmi("10.70.1.5", {}))).toBeUndefined();
    // Completed before the target's handler wrote the new interfaces: nothing moved yet.
    expect(moves.observe(vmi("10.70.1.5", { completed: true }))).toBeUndefined();
    expect(moves.observe(vmi("10.70.2.9", { completed: true }))).toEqual({
      vmiUid: "vmi-1",
      migrationUid: "mig-1",
      from: ["10.70.1.5"],
      to: ["10.70.2.9"],
    });
    // Told once: later updates of the same migration move nothing.
    expect(moves.observe(vmi("10.70.2.9", { completed: true }))).toBeUndefined();
  });

  it("takes the addresses seen before a migration as its source, and follows the next migration", () => {
    const moves = new AddressMoves();
    moves.observe(vmi("10.70.1.5"));
    // The first update that shows the migration already carries the target's address and its completion.
    expect(moves.observe(vmi("10.70.2.9", { completed: true }))?.from).toEqual(["10.70.1.5"]);
    expect(moves.observe(vmi("10.70.2.9", { migrationUid: "mig-2" }))).toBeUndefined();
    expect(moves.observe(vmi("10.70.1.7", { migrationUid: "mig-2", completed: true }))?.from).toEqual(["10.70.2.9"]);
  });

  it("moves nothing for a failed migration, an unchanged address, or a migration it did not see start", () => {
    const failed = new AddressMoves();
    failed.observe(vmi("10.70.1.5"));
    expect(failed.observe(vmi("10.70.1.5", { failed: true }))).toBeUndefined();
    expect(failed.observe(vmi("10.70.1.5", { failed: true, completed: true }))).toBeUndefined();

    const same = new AddressMoves();
    same.observe(vmi("10.70.1.5"));
    expect(same.observe(vmi("10.70.1.5", { completed: true }))).toBeUndefined();

    const late = new AddressMoves(); // a handler started after the target reported
    expect(late.observe(vmi("10.70.2.9", { completed: true }))).toBeUndefined();
  });

  it("keeps VMIs apart and forgets a deleted one", () => {
    const moves = new AddressMoves();
    moves.observe(vmi("10.70.1.5", undefined, "a"));
    moves.observe(vmi("10.70.1.6", undefined, "b"));
    expect(moves.observe(vmi("10.70.2.9", { completed: true }, "b"))?.from).toEqual(["10.70.1.6"]);
    moves.forget("a");
    expect(moves.observe(vmi("10.70.2.8", { completed: true }, "a"))).toBeUndefined();
  });
});

describe("MigratedFlows", () => {
  /** A MigratedFlows whose timers run when `fire()` is called, with the deleter's calls recorded. */
  function harness(deleter: (f: ConntrackFlows) => Promise<number>) {
    const timers: { fn: () => void; ms: number }[] = [];
    const flows = new MigratedFlows({
      deleter,
      logger: pino({ level: "silent" }),
      delaysMs: [0, 1000, 5000],
      setTimer: (fn, ms) => {
        timers.push({ fn, ms });
        return setTimeout(() => {}, 0);
      },
    });
    const fire = async (): Promise<void> => {
      for (const t of timers.splice(0)) t.fn();
      await new Promise((r) => setImmediate(r));
    };
    return { flows, timers, fire };
  }

  it("deletes the flows whose replies come from the old address, on each pass", async () => {
    const calls: ConntrackFlows[] = [];
    const { flows, timers, fire } = harness((f) => {
      calls.push(f);
      return Promise.resolve(1);
    });
    flows.observe(vmi("10.70.1.5"));
    flows.observe(vmi("10.70.1.5", {}));
    expect(timers).toEqual([]);
    flows.observe(vmi("10.70.2.9", { completed: true }));
    expect(timers.map((t) => t.ms)).toEqual([0, 1000, 5000]);
    await fire();
    expect(calls).toEqual([{ replySource: "10.70.1.5" }, { replySource: "10.70.1.5" }, { replySource: "10.70.1.5" }]);
    flows.stop();
  });

  it("survives a deleter that fails (the flows then time out as before)", async () => {
    let tries = 0;
    const { flows, fire } = harness(() => {
      tries++;
      return Promise.reject(new Error("conntrack: Operation not permitted"));
    });
    flows.observe(vmi("10.70.1.5"));
    flows.observe(vmi("10.70.2.9", { completed: true }));
    await fire();
    expect(tries).toBe(3);
    flows.stop();
  });
});

describe("nodeConntrackDeleter", () => {
  it("runs in this process's namespace when the node's is the same, and names one it cannot read", () => {
    expect(typeof nodeConntrackDeleter("/proc/self/ns/net")).toBe("function");
    expect(() => nodeConntrackDeleter("/proc/0/ns/net")).toThrow(/cannot read the node's network namespace/);
  });
});
