/**
 * The Linux-guest checks of our VMM, run INSIDE the L1 host (l1-run.ts) where /dev/kvm is a hardware-style (nested
 * SVM) KVM. Each check prints one line `KVT_NESTED_CHECK {"name","ok","ms","detail"}` that the lane collects.
 *
 *   boot 1: demo image + NoCloud seed (#! user data) --> first console byte --> boot marker --> cloud-init line
 *           --> `echo hi` answered --> `reboot` --> "reset" shutdown --> boot 2 (same VM spec, a new machine)
 *   boot 2: marker --> `poweroff` --> "guest-exit" code 0 (ACPI S5)
 *   boot 3: marker --> the host sends Ctrl-Alt-Del (PS/2 keyboard) --> the init powers off --> "guest-exit" 0
 *   boot 4: marker --> shell counter --> live migration to a second VMM process --> the counter continues there,
 *           the guest clocks moved no more than the downtime --> Ctrl-Alt-Del on the target (live-migration-checks.ts)
 *   boot 5: the same with 2 vCPUs (check names end in -2vcpu)
 *
 *   vm-cirros: the seed's vm-cirros VM through two real virt-launcher processes driven over launcher-rpc: boot,
 *           cloud-init line, `echo hi`, counter, live migration, counter continues, source exits (vm-cirros-checks.ts)
 *
 *   disk:   the demo image with two virtio-blk disks: size, serial, the host's pattern read, a guest write the host
 *           finds after power-off, a read-only disk refusing writes; then a live migration while the guest writes to a
 *           disk both VMM processes open, every acknowledged write found in the file (disk-checks.ts)
 *
 *   block:  a Block claim's device (a loop device in L1, ReadWriteMany) as a disk of the seed's VM through two
 *           virt-launchers: the guest's writes land on the device, the live migration sends none of it, the target
 *           reads the source's write back; L1 checks the device, then detaches it (block-claim-checks.ts)
 *
 *   net:    the demo image with a virtio-net NIC on a tap in L1 (bridge kvtbr0): eth0's MAC and carrier, ping both
 *           ways, 8 MiB each way over TCP; then a live migration to a VMM on a second tap of the bridge, and the
 *           same traffic on the target (net-checks.ts)
 *
 *   debian: local/debian-cloud (Debian 12 from its disk, systemd, cloud-init) through a real virt-launcher: the
 *           boot marker, the user data's console line and file, a console login, the SSH key in authorized_keys,
 *           root on vda, `sudo poweroff` (debian-checks.ts; only with `debian`, not in the full run)
 *
 *   then:   the test-guest suites of libs/vmm and libs/migration under vitest (guest-suite.ts), one check per file
 *
 * Run by hand inside L1: node tools/nested/src/guest-checks.ts [migration [vcpus] | vm-cirros | disk | block | net | debian | suite |
 *   host | resume GROUP]
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { DEMO_BOOT_MARKER, DEMO_LINUX_IMAGE, defaultStoreRoot, imageDir } from "@kvt/images";
import { hasKvm } from "@kvt/vmm";
import { blockClaimChecks } from "./block-claim-checks.ts";
import { type ConsolePeer, check, converse, GROUP_START, report, within } from "./check-runner.ts";
import { debianChecks } from "./debian-checks.ts";
import { bootDemo, CLOUD_INIT_LINE, type DemoGuest } from "./demo-guest.ts";
import { diskChecks } from "./disk-checks.ts";
import { testGuestSuiteChecks } from "./guest-suite.ts";
import { liveMigrationChecks } from "./live-migration-checks.ts";
import { netChecks } from "./net-checks.ts";
import { vmCirrosChecks } from "./vm-cirros-checks.ts";

const BOOT_TIMEOUT_MS = 240_000;
/** systemd, cloud-init's four stages (Python) and the getty of local/debian-cloud, in L2 under L1's TCG. */
const DEBIAN_BOOT_TIMEOUT_MS = 600_000;

const local = (g: DemoGuest): ConsolePeer => ({ console: g.console, writeSerial: (t) => g.vm.writeSerial(t) });

async function main(): Promise<void> {
  if (!hasKvm()) throw new Error("no /dev/kvm in L1");
  if (!existsSync(join(imageDir(defaultStoreRoot(), DEMO_LINUX_IMAGE), "vmlinuz"))) throw new Error("no demo image");
  // `migration [vcpus]` as the job's arguments runs only the live-migration checks (boot 4), with that many vCPUs;
  // `vm-cirros` only the seed's VM through virt-launcher; `disk` only the virtio-blk checks (disk-checks.ts);
  // `block` only the Block claim checks (block-claim-checks.ts); `net` only the virtio-net checks (net-checks.ts);
  // `suite` only the test-guest suites (guest-suite.ts).
  // `host`: everything but the suites (on a host whose KVM runs Linux, `npm test` ran those files already).
  // `resume GROUP`: the full run from that group of FULL_RUN on.
  const only = process.argv[2];
  const all = only === undefined || only === "host";
  if (only === "migration") await liveMigrationChecks(BOOT_TIMEOUT_MS, Number(process.argv[3] ?? 1));
  if (all || only === "resume") {
    // `resume GROUP`: the full run from GROUP on (the lane re-runs a group that stalled in a fresh L1).
    const from = only === "resume" ? FULL_RUN.findIndex((g) => g.name === process.argv[3]) : 0;
    if (from < 0) throw new Error(`resume: no group ${process.argv[3]} (${FULL_RUN.map((g) => g.name).join(", ")})`);
    for (const group of FULL_RUN.slice(from)) {
      if (only === "host" && group.name === "suite") continue;
      process.stdout.write(`${GROUP_START}${group.name}\n`); // the lane knows where to resume
      await group.run();
    }
    return;
  }
  if (only === "vm-cirros") await vmCirrosChecks(BOOT_TIMEOUT_MS);
  if (only === "disk") await diskChecks(BOOT_TIMEOUT_MS);
  if (only === "block") await blockClaimChecks(BOOT_TIMEOUT_MS);
  if (only === "net") await netChecks(BOOT_TIMEOUT_MS);
  // `debian`: a real distribution from its disk (systemd and cloud-init take minutes under TCG: not in the full run).
  if (only === "debian") await debianChecks(DEBIAN_BOOT_TIMEOUT_MS);
  // `suite [FILE...]`: only the suites (those files of L1_SUITES when named).
  if (only === "suite") await testGuestSuiteChecks(process.argv.slice(3));
}

/** The full run's groups, in order (`host` skips the suites: on such a host `npm test` ran those files already). */
const FULL_RUN: readonly { readonly name: string; readonly run: () => Promise<void> }[] = [
  { name: "boot", run: bootChecks },
  { name: "migration", run: () => liveMigrationChecks(BOOT_TIMEOUT_MS, 1) },
  { name: "migration-2vcpu", run: () => liveMigrationChecks(BOOT_TIMEOUT_MS, 2) }, // the APs' LAPIC and MP state move
  { name: "vm-cirros", run: () => vmCirrosChecks(BOOT_TIMEOUT_MS) },
  { name: "disk", run: () => diskChecks(BOOT_TIMEOUT_MS) },
  { name: "block", run: () => blockClaimChecks(BOOT_TIMEOUT_MS) },
  { name: "net", run: () => netChecks(BOOT_TIMEOUT_MS) },
  { name: "suite", run: () => testGuestSuiteChecks() },
];

async function bootChecks(): Promise<void> {
  const userData = `#!/bin/sh\necho "${CLOUD_INIT_LINE}"\n`;
  const g = bootDemo({ userData });
  let booted = await check("boot-to-marker", async () => {
    const m = await g.console.waitFor(new RegExp(DEMO_BOOT_MARKER), BOOT_TIMEOUT_MS);
    return `first console byte ${Math.round(g.console.firstByteMs ?? -1)} ms, marker ${Math.round(m.atMs)} ms: ${m.line}`;
  });
  if (booted) {
    await check("cloud-init-userdata", async () => (await g.console.waitFor(new RegExp(CLOUD_INIT_LINE), 30_000)).line);
    await check("console-echo-hi", async () => (await converse(local(g), "echo h''i", /^hi$/, 30_000)).line);
    await check("guest-reboot", async () => {
      g.vm.writeSerial("reboot\n");
      const ev = await within(g.shutdown, 60_000, "reset after `reboot`");
      if (ev.reason !== "reset") throw new Error(`expected a reset, got ${ev.reason} code ${ev.code}`);
      return `shutdown event ${ev.reason}`;
    });
  }
  g.vm.stop();
  const g2 = bootDemo();
  booted = await check("reboot-boots-again", async () => {
    const m = await g2.console.waitFor(new RegExp(DEMO_BOOT_MARKER), BOOT_TIMEOUT_MS);
    return `marker ${Math.round(m.atMs)} ms`;
  });
  if (booted) {
    await check("guest-poweroff", async () => {
      await converse(local(g2), "echo ready", /^ready$/, 30_000);
      g2.vm.writeSerial("poweroff\n");
      const ev = await within(g2.shutdown, 60_000, "power-off");
      if (ev.reason !== "guest-exit" || ev.code !== 0)
        throw new Error(`expected guest-exit 0, got ${ev.reason} ${ev.code}`);
      return "guest-exit code 0 (ACPI S5)";
    });
  }
  g2.vm.stop();
  const g3 = bootDemo();
  booted = await check("host-ctrl-alt-del-boot", async () => {
    const m = await g3.console.waitFor(new RegExp(DEMO_BOOT_MARKER), BOOT_TIMEOUT_MS);
    return `marker ${Math.round(m.atMs)} ms`;
  });
  if (booted) {
    await check("host-ctrl-alt-del-shutdown", async () => {
      await converse(local(g3), "echo ready", /^ready$/, 30_000);
      g3.vm.sendCtrlAltDel();
      const ev = await within(g3.shutdown, 60_000, "power-off after Ctrl-Alt-Del");
      if (ev.reason !== "guest-exit" || ev.code !== 0)
        throw new Error(`expected guest-exit 0, got ${ev.reason} ${ev.code}`);
      return "the guest's init powered off: guest-exit code 0";
    });
  }
  g3.vm.stop();
}

await main().catch((err: unknown) => {
  report({ name: "lane", ok: false, ms: 0, detail: (err as Error).message });
});
// The end line: without it the lane counts the run as unfinished (crashed, or stopped by its timeout).
process.stdout.write("KVT_NESTED_DONE\n");
process.exit(0);
