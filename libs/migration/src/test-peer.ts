/**
 * A migration peer process for the live tests and the bench (not part of the library API): holds at most one Vm
 * and obeys messages from its parent over the fork IPC channel.
 *
 *   parent -> peer: {op:"boot", memoryBytes, cmdline}        create + start the test guest
 *                   {op:"prepare", memoryBytes, tls}          create an empty Vm and listen -> {ev:"listening"}
 *                   {op:"trust", certificate}                 pin the source's certificate (the handlers' exchange)
 *                   {op:"migrate", destination, options}      send the Vm away -> {ev:"migrated", result}
 *                   {op:"cancel"}                             cancel the outgoing migration in flight
 *                   {op:"exit"}                               stop everything and exit
 *   peer -> parent: {ev:"serial", data} raw console bytes, {ev:"shutdown"}, {ev:"incoming-done"|"incoming-failed"},
 *                   {ev:"migrated", result, cpuSeconds} (incoming-done's stats carry cpuSeconds too: this process's
 *                   CPU time, every thread, from prepare/migrate to the end),
 *                   {ev:"switching"} before a switch-over when asked (options.holdSwitchOver), answered by {op:"go"}
 */
import { testGuestPath, Vm } from "@kvt/vmm";
import { OutgoingMigration, type OutgoingOptions } from "./source.ts";
import { type IncomingMigration, prepareIncoming } from "./target.ts";
import type { MigrationTarget, MigrationTlsIdentity } from "./types.ts";

/** Messages a peer accepts. */
export type PeerCommand =
  | { op: "boot"; memoryBytes: number; cmdline: string }
  | { op: "prepare"; memoryBytes: number; digest?: boolean; tls: MigrationTlsIdentity | false }
  | { op: "trust"; certificate: string }
  | {
      op: "migrate";
      destination: MigrationTarget;
      options: OutgoingOptions & { holdSwitchOver?: boolean };
    }
  | { op: "go" }
  | { op: "cancel" }
  | { op: "exit" };

let vm: Vm | undefined;
let go: (() => void) | undefined;
let current: OutgoingMigration | undefined;
let incoming: IncomingMigration | undefined;

function send(msg: object): void {
  process.send?.(msg);
}

/** CPU seconds (user + system, every thread of this process) since `start`. */
function cpuSecondsSince(start: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(start);
  return (d.user + d.system) / 1e6;
}

function attach(v: Vm): void {
  v.on("serial-output", (chunk) => send({ ev: "serial", data: Buffer.from(chunk).toString("latin1") }));
  v.on("shutdown", ({ reason, code }) => send({ ev: "shutdown", reason, code }));
}

function release(): void {
  if (vm && vm.state !== "stopped") vm.stop();
  vm = undefined;
}

async function handle(cmd: PeerCommand): Promise<void> {
  switch (cmd.op) {
    case "boot":
      release();
      vm = Vm.create({
        memoryBytes: cmd.memoryBytes,
        vcpus: 1,
        kernel: { path: testGuestPath(), cmdline: cmd.cmdline },
      });
      attach(vm);
      vm.start();
      send({ ev: "booted" });
      return;
    case "prepare": {
      release();
      const target = Vm.create({ memoryBytes: cmd.memoryBytes, vcpus: 1 });
      vm = target;
      attach(target);
      const prepared = prepareIncoming(target, { digest: cmd.digest ?? false, tls: cmd.tls });
      incoming = prepared;
      send({ ev: "listening", destination: prepared.destination });
      const cpu = process.cpuUsage();
      try {
        const stats = await prepared.done;
        send({ ev: "incoming-done", stats: { ...stats, cpuSeconds: cpuSecondsSince(cpu) } });
      } catch (e) {
        send({ ev: "incoming-failed", error: e instanceof Error ? e.message : String(e) });
      }
      return;
    }
    case "trust":
      incoming?.trustPeer(cmd.certificate);
      send({ ev: "trusted" });
      return;
    case "migrate": {
      if (!vm) throw new Error("no vm to migrate");
      const hold = cmd.options.holdSwitchOver ?? false;
      const m = new OutgoingMigration(vm, cmd.destination, {
        ...cmd.options,
        onProgress: (p) => send({ ev: "progress", progress: p }),
        beforeSwitchOver: hold
          ? () =>
              new Promise<void>((resolve) => {
                go = resolve;
                send({ ev: "switching" });
              })
          : undefined,
      });
      current = m;
      const cpu = process.cpuUsage();
      const result = await m.run();
      current = undefined;
      if (result.ok) vm = undefined;
      send({ ev: "migrated", result, cpuSeconds: cpuSecondsSince(cpu) });
      return;
    }
    case "cancel":
      current?.cancel();
      return;
    case "go":
      go?.();
      return;
    case "exit":
      release();
      process.exit(0);
  }
}

process.on("message", (m) => {
  handle(m as PeerCommand).catch((e: unknown) =>
    send({ ev: "error", error: e instanceof Error ? e.message : String(e) }),
  );
});
send({ ev: "ready" });
