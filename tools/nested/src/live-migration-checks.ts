/**
 * The nested lane's live migration of a running Linux guest between two VMM processes (inside L1, over loopback
 * TCP, with @kvt/migration as the launcher uses it):
 *
 *   this process (source VMM)                           migration-target.ts (target VMM, a second Node process)
 *   boot the demo image --> marker --> shell counter     Vm.create(same demo options), not started
 *   `echo T=$(date +%s) U=<uptime>` (guest vs host)  <---  listening {host, port, secret}
 *   OutgoingMigration.run(): bulk, dirty rounds,  --->   memory + machine state (PIC/IOAPIC/PIT, LAPIC, kvmclock,
 *     switch-over (pause, last pages, state)             MSRs, UART, 8042) --> restore --> vCPUs run
 *                                                        console: `count N` continues from the source's last N
 *                                                        `echo T=...` again: the clock jumped <= downtime + slack
 *                                                        Ctrl-Alt-Del (8042) --> init powers off: guest-exit 0
 */

import { DEMO_BOOT_MARKER } from "@kvt/images";
import { OutgoingMigration } from "@kvt/migration";
import { type ConsolePeer, check, converse, typeLine, within } from "./check-runner.ts";
import { bootDemo } from "./demo-guest.ts";
import { laneMigrationOptions, spawnTarget, type TargetPeer } from "./migration-peer.ts";
import {
  CLOCK_ANSWER,
  CLOCK_PROBE,
  type ClockSample,
  COUNTER_LOOP,
  counterValues,
  judgeClock,
  judgeCounter,
  parseClockProbe,
} from "./migration-verdict.ts";

/** Console latency of the two clock answers (nested: every byte is an exit), on top of the measured downtime. */
export const CLOCK_SLACK_MS = 1000;
/** Count lines the target must print after the source's last one. */
export const COUNTS_ON_TARGET = 3;

async function clockSample(peer: ConsolePeer): Promise<ClockSample> {
  const answer = await converse(peer, CLOCK_PROBE, CLOCK_ANSWER, 30_000);
  const clocks = parseClockProbe(answer.line);
  if (clocks === undefined) throw new Error(`cannot read the guest clocks from ${JSON.stringify(answer.line)}`);
  return { ...clocks, hostSeconds: answer.hostMs / 1000 };
}

/** Waits until the target printed COUNTS_ON_TARGET `count N` lines after the source's last one. */
export async function countsOnTarget(source: ConsolePeer, target: ConsolePeer, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const have = (): number => counterValues(source.console.text + target.console.text).length;
  const want = counterValues(source.console.text).length + COUNTS_ON_TARGET;
  while (have() < want) {
    if (Date.now() > deadline) throw new Error(`fewer than ${COUNTS_ON_TARGET} count lines on the target`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

interface Migrated {
  readonly target: TargetPeer;
  readonly downtimeMs: number;
}

async function migrate(
  source: ReturnType<typeof bootDemo>,
  vcpus: number,
): Promise<{ detail: string; migrated: Migrated }> {
  const target = await spawnTarget({ vcpus });
  try {
    const migration = new OutgoingMigration(source.vm, target.destination, laneMigrationOptions(target));
    const result = await migration.run();
    if (!result.ok) throw new Error(`the migration failed: ${result.failureReason}`);
    const stats = await within(target.running, 60_000, "the guest running on the target");
    const downtimeMs = result.downtimeMs ?? 0;
    const detail =
      `downtime ${Math.round(downtimeMs)} ms, total ${result.totalSeconds.toFixed(1)} s, ${result.iterations} passes, ` +
      `${(result.bytesSent / 2 ** 20).toFixed(1)} MiB sent (${result.dataPages} data + ${result.zeroPages} zero pages), ` +
      `target restore+start ${Math.round(Number(stats.restoreMs ?? -1))} ms`;
    return { detail, migrated: { target, downtimeMs } };
  } catch (err) {
    await target.stop();
    throw err;
  }
}

/** Boots a demo guest (`vcpus` vCPUs), starts its counter, migrates it to a target process and checks it there. */
export async function liveMigrationChecks(bootTimeoutMs: number, vcpus = 1): Promise<void> {
  const suffix = vcpus > 1 ? `-${vcpus}vcpu` : ""; // check names of a multi-vCPU run
  const g = bootDemo({ vcpus });
  const source: ConsolePeer = { console: g.console, writeSerial: (t) => g.vm.writeSerial(t) };
  const booted = await check(`migration-source-boot${suffix}`, async () => {
    const m = await g.console.waitFor(new RegExp(DEMO_BOOT_MARKER), bootTimeoutMs);
    return `marker ${Math.round(m.atMs)} ms`;
  });
  if (booted) {
    // The SMBIOS tables of the direct boot (native/src/vmm/smbios.h) as the guest's DMI sees them.
    await check(`smbios-system-identity${suffix}`, async () => {
      // A trailing " E" marks each answer as complete (the console matches partial lines too).
      const v = await converse(source, "echo V=$(cat /sys/class/dmi/id/sys_vendor) E", /^V=.* E$/, 30_000);
      const p = await converse(source, "echo P=$(cat /sys/class/dmi/id/product_name) E", /^P=.* E$/, 30_000);
      if (v.line !== "V=KubeVirt E" || p.line !== "P=None E") throw new Error(`DMI says ${v.line} ${p.line}`);
      return "sys_vendor KubeVirt, product_name None (SMBIOS type 1 at 0xf0000)";
    });
  }
  let before: ClockSample | undefined;
  const counting =
    booted &&
    (await check(`migration-counter-started${suffix}`, async () => {
      await converse(source, "echo ready", /^ready$/, 30_000);
      await converse(source, "cd /sys/devices/system/clocksource/clocksource0 && echo IN", /^IN$/, 30_000);
      const cs = await converse(source, "echo CS=$(cat current_clocksource) E", /^CS=\S+ E$/, 30_000);
      const cpus = await converse(source, "echo C=$(grep -c ^processor /proc/cpuinfo) E", /^C=\d+ E$/, 30_000);
      typeLine(source, COUNTER_LOOP);
      await g.console.waitFor(/^count 3$/, 60_000);
      before = await clockSample(source);
      return `count 3 on the source; guest ${cpus.line.slice(2, -2)} CPUs, ${cs.line.replace("CS=", "clocksource ").replace(/ E$/, "")}, date ${before.guestWall}, uptime ${before.guestUptime} s`;
    }));
  let migrated: Migrated | undefined;
  if (counting) {
    await check(`live-migration${suffix}`, async () => {
      const r = await migrate(g, vcpus);
      migrated = r.migrated;
      return r.detail;
    });
  }
  if (migrated && before) {
    const { target, downtimeMs } = migrated;
    const clockBefore = before;
    await check(`migration-counter-continues${suffix}`, async () => {
      await countsOnTarget(source, target, 90_000);
      const v = judgeCounter(g.console.text, target.console.text, COUNTS_ON_TARGET);
      if (!v.ok) throw new Error(v.detail);
      return v.detail;
    });
    await check(`migration-guest-clock${suffix}`, async () => {
      const v = judgeClock(clockBefore, await clockSample(target), downtimeMs, CLOCK_SLACK_MS);
      if (!v.ok) throw new Error(v.detail);
      return v.detail;
    });
    // Ctrl-Alt-Del from the target's host side: needs the 8042's restored state (keyboard enabled, its interrupt
    // on), IRQ 1 through the restored PIC/IOAPIC, and ACPI power-off; the demo init powers off on it.
    await check(`migrated-guest-ctrl-alt-del${suffix}`, async () => {
      target.sendCtrlAltDel();
      const ev = await within(target.shutdown, 60_000, "power-off on the target after Ctrl-Alt-Del").catch((err) => {
        throw new Error(
          `${(err as Error).message}${target.errors.length ? `; target: ${target.errors.join("; ")}` : ""}`,
        );
      });
      if (ev.reason !== "guest-exit" || ev.code !== 0)
        throw new Error(`expected guest-exit 0, got ${ev.reason} ${ev.code}`);
      return "the guest's init powered off on the target: guest-exit code 0";
    });
    await target.stop();
  }
  g.vm.stop();
}
