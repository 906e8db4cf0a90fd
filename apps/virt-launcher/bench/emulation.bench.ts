/**
 * `npm run bench -- emulation [--boots N]`: the demo VM under software emulation (QEMU TCG, 1 vCPU, 256 MiB, the
 * vm-cirros user data): time from start() to the init's boot marker (median of N boots, default 3), then one live
 * migration between two QEMU machines through the authenticated relay while a shell counter runs.
 * Last line: {"area":"emulation","bootMarkerMs":..,"migrationTotalSeconds":..,"downtimeMs":..,"counterContinued":..}
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { createLogger } from "@kvt/observability";
import type { MachineSpec } from "../src/machine/machine.ts";
import { migrationTlsPair } from "../src/machine/migration-tls.test-util.ts";
import { QemuMachine } from "../src/machine/qemu/qemu-machine.ts";
import { imageStoreResolver } from "../src/vmi/image-store.ts";
import { buildNoCloudDisk } from "../src/volumes/cloud-init-disks.ts";

const { values } = parseArgs({ options: { boots: { type: "string", default: "3" } } });
const boots = Math.max(1, Number(values.boots) || 3);
const root = new URL("../../../", import.meta.url).pathname;
const USER_DATA = Buffer.from(
  "IyEvYmluL3NoCgplY2hvICdwcmludGVkIGZyb20gY2xvdWQtaW5pdCB1c2VyZGF0YScK",
  "base64",
).toString();
const MARKER = "KVT_DEMO_LINUX_BOOTED";
const logger = createLogger({ component: "emulation-bench", level: "silent" });

execFileSync(process.execPath, [join(root, "tools/images/src/cli.ts")], { stdio: ["ignore", "ignore", "inherit"] });
const dir = mkdtempSync(join(tmpdir(), "kvt-emu-bench-"));
// The launcher's own resolver over the store tools/images writes (KVT_IMAGE_STORE, else <project>/.data/images).
const boot = imageStoreResolver(process.env.KVT_IMAGE_STORE ?? join(root, ".data/images"))("local/demo-linux:latest");
// The user data reaches the guest as vm-cirros's does: a cloudInitNoCloud disk (an ISO labelled cidata).
const seed = join(dir, "cloudinitdisk.iso");
const identity = { name: "vm-cirros", namespace: "default", firmwareUuid: "5d307ca9-b3ef-428c-8861-06e72d69f223" };
writeFileSync(seed, buildNoCloudDisk({ userData: USER_DATA }, identity, { timestamp: new Date(0) }));
const spec = (name: string): MachineSpec => ({
  vmiKey: "default/vm-cirros",
  memoryBytes: 256 * 1024 * 1024,
  vcpus: 1,
  boot,
  disks: [{ name: "cloudinitdisk", path: seed, readOnly: true, shared: false, kind: "cloudInitNoCloud" }],
  workDir: join(dir, name),
});

function consoleText(m: QemuMachine): { text: () => string } {
  let text = "";
  m.on("console", (c) => {
    text += Buffer.from(c).toString("latin1");
  });
  return { text: () => text };
}

async function waitFor(get: () => string, re: RegExp, timeoutMs: number): Promise<RegExpMatchArray> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = get().match(re);
    if (m) return m;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${re}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const machines: QemuMachine[] = [];
try {
  const bootMs: number[] = [];
  let last: { m: QemuMachine; text: () => string } | undefined;
  for (let i = 0; i < boots; i++) {
    const m = new QemuMachine(spec(`boot${i}`), { logger });
    machines.push(m);
    const c = consoleText(m);
    const t0 = performance.now();
    await m.start();
    await waitFor(c.text, new RegExp(MARKER), 180_000);
    bootMs.push(performance.now() - t0);
    await waitFor(c.text, /printed from cloud-init userdata/, 60_000);
    if (last) await last.m.kill();
    last = { m, text: c.text };
  }
  const source = last as { m: QemuMachine; text: () => string };
  source.m.writeConsole(Buffer.from('i=0; while true; do i=$((i+1)); echo "count=$i"; usleep 200000; done &\n'));
  await waitFor(source.text, /count=5\b/, 60_000);
  const target = new QemuMachine(spec("target"), { logger });
  machines.push(target);
  const tc = consoleText(target);
  const tls = await migrationTlsPair(); // as the two handlers mint them
  const where = await target.prepareIncoming({ tls: tls.target });
  target.trustMigrationSource(tls.source.certificate);
  const result = await source.m.migrateTo(where, {
    bandwidthBytesPerSec: 0,
    maxDowntimeMs: 300,
    allowAutoConverge: false,
    completionTimeoutSec: 300,
    progressTimeoutSec: 60,
    tls: tls.source,
  });
  if (!result.ok) throw new Error(`migration failed: ${result.failureReason}`);
  const before = Math.max(...[...source.text().matchAll(/count=(\d+)/g)].map((m) => Number(m[1])));
  const after = Number((await waitFor(tc.text, /count=(\d+)/, 60_000))[1]);
  const counterContinued = after > before && after < before + 100;
  bootMs.sort((a, b) => a - b);
  const median = bootMs[Math.floor(bootMs.length / 2)] ?? 0;
  const rows: [string, string][] = [
    ["boots", String(boots)],
    ["boot to marker, each (ms)", bootMs.map((b) => b.toFixed(0)).join(", ")],
    ["boot to marker, median (ms)", median.toFixed(0)],
    ["migration total (s)", result.totalSeconds.toFixed(3)],
    ["migration downtime (ms)", String(result.downtimeMs)],
    ["migration bytes / iterations", `${result.bytesSent} / ${result.iterations}`],
    ["counter before -> first after", `${before} -> ${after}`],
  ];
  for (const [k, v] of rows) process.stdout.write(`${k.padEnd(32)} ${v}\n`);
  process.stdout.write(
    `${JSON.stringify({
      area: "emulation",
      bootMarkerMs: Math.round(median),
      migrationTotalSeconds: result.totalSeconds,
      downtimeMs: result.downtimeMs,
      counterContinued,
    })}\n`,
  );
} finally {
  for (const m of machines) await m.kill();
  rmSync(dir, { recursive: true, force: true });
}
