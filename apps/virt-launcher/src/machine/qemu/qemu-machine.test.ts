// Real QEMU (TCG) with the real demo image: one boot shared by the console, pause/resume and migration tests.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { createLogger } from "@kvt/observability";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { imageStoreResolver } from "../../vmi/image-store.ts";
import { buildNoCloudDisk } from "../../volumes/cloud-init-disks.ts";
import type { MachineSpec, MigrationOptions, MigrationTarget } from "../machine.ts";
import { migrationTlsPair } from "../migration-tls.test-util.ts";
import { QemuMachine } from "./qemu-machine.ts";

const USER_DATA = Buffer.from(
  "IyEvYmluL3NoCgplY2hvICdwcmludGVkIGZyb20gY2xvdWQtaW5pdCB1c2VyZGF0YScK",
  "base64",
).toString();
const MARKER = "KVT_DEMO_LINUX_BOOTED";
const root = new URL("../../../../../", import.meta.url).pathname;
const logger = createLogger({ component: "virt-launcher-test", level: "silent" });
/** The knobs; each migration adds its source's TLS identity (the relay's hop runs over TLS, as in production). */
const knobs = {
  bandwidthBytesPerSec: 0,
  maxDowntimeMs: 300,
  allowAutoConverge: false,
  completionTimeoutSec: 120,
  progressTimeoutSec: 60,
};

/** A target prepared over TLS with fresh certificates (the source's pinned there: the handlers' exchange), and the
 *  source's options for it. */
async function preparedTls(t: QemuMachine): Promise<{ where: MigrationTarget; migration: MigrationOptions }> {
  const tls = await migrationTlsPair();
  const where = await t.prepareIncoming({ tls: tls.target });
  t.trustMigrationSource(tls.source.certificate);
  return { where, migration: { ...knobs, tls: tls.source } };
}

/** Collects a machine's console as text and waits for patterns in it. */
class ConsoleWatch {
  text = "";
  constructor(m: QemuMachine) {
    m.on("console", (c) => {
      this.text += Buffer.from(c).toString("latin1");
    });
  }
  async waitFor(re: RegExp, timeoutMs: number, from = 0): Promise<RegExpMatchArray> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const m = this.text.slice(from).match(re);
      if (m) return m;
      if (Date.now() > deadline)
        throw new Error(`console never matched ${re}; last output: ${JSON.stringify(this.text.slice(-500))}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

describe("QemuMachine (real QEMU, TCG, demo image)", { timeout: 240_000 }, () => {
  let dir: string;
  let spec: (name: string) => MachineSpec;
  const machines: QemuMachine[] = [];
  const children: ChildProcess[] = [];
  let source: QemuMachine;
  let sourceConsole: ConsoleWatch;

  beforeAll(async () => {
    execFileSync(process.execPath, [join(root, "tools/images/src/cli.ts")], { stdio: "inherit" });
    dir = mkdtempSync(join(tmpdir(), "kvt-qemu-"));
    const boot = imageStoreResolver(process.env.KVT_IMAGE_STORE ?? join(root, ".data/images"))(
      "local/demo-linux:latest",
    );
    // The VMI's cloud-init volume as the launcher makes it: a NoCloud ISO, the guest's one disk.
    const iso = join(dir, "cidata.iso");
    const identity = { name: "vm-cirros", namespace: "default", firmwareUuid: "5d307ca9-b3ef-428c-8861-06e72d69f223" };
    writeFileSync(iso, buildNoCloudDisk({ userData: USER_DATA }, identity, { timestamp: new Date(0) }));
    spec = (name) => ({
      vmiKey: "default/vm-cirros",
      memoryBytes: 256 * 1024 * 1024,
      vcpus: 1,
      boot,
      disks: [{ name: "cloudinitdisk", path: iso, readOnly: true, kind: "cloudInitNoCloud", shared: true }],
      firmwareUuid: "5d307ca9-b3ef-428c-8861-06e72d69f223",
      workDir: join(dir, name),
    });
    source = new QemuMachine(spec("a"), { logger });
    machines.push(source);
    sourceConsole = new ConsoleWatch(source);
    await source.start();
  }, 240_000);

  afterAll(async () => {
    for (const m of machines) await m.kill();
    for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  });

  it("boots to the marker and runs the cloud-init user data from the NoCloud seed", async () => {
    expect(source.state).toBe("running");
    await sourceConsole.waitFor(new RegExp(`${MARKER}.*seed /dev/vda`), 120_000);
    await sourceConsole.waitFor(/printed from cloud-init userdata/, 60_000);
    expect(Buffer.from(source.consoleScrollback()).toString("latin1")).toContain(MARKER);
    // The guest's monitor is the launcher user's only (issue 23): the socket 0600, its directory 0700.
    expect(statSync(join(dir, "a", "qmp.sock")).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, "a")).mode & 0o777).toBe(0o700);
  });

  it("answers echo hi on the serial console; the guest sees the firmware UUID and the meta-data hostname", async () => {
    const from = sourceConsole.text.length;
    source.writeConsole(Buffer.from("echo hi; cat /sys/class/dmi/id/product_uuid; echo host=$(hostname)\n"));
    await sourceConsole.waitFor(/host=vm-cirros/, 30_000, from);
    await sourceConsole.waitFor(/\r?\nhi\r?\n/, 30_000, from);
    await sourceConsole.waitFor(/5d307ca9-b3ef-428c-8861-06e72d69f223/i, 30_000, from);
  });

  it("pauses and resumes; reports stats", async () => {
    await source.pause();
    expect(source.state).toBe("paused");
    expect((await source.stats()).state).toBe("paused");
    await source.resume();
    expect(source.state).toBe("running");
    const stats = await source.stats();
    expect(stats.vcpuSeconds).toHaveLength(1);
    expect(stats.vcpuSeconds[0]).toBeGreaterThan(0);
    const from = sourceConsole.text.length;
    source.writeConsole(Buffer.from("echo after-$((20+1))\n"));
    await sourceConsole.waitFor(/after-21/, 30_000, from);
  });

  it("refuses a wrong migration secret; cancels and survives a failed migration with the guest running on", async () => {
    source.writeConsole(Buffer.from('i=0; while true; do i=$((i+1)); echo "count=$i"; usleep 200000; done &\n'));
    await sourceConsole.waitFor(/count=5\b/, 60_000);
    const t1 = new QemuMachine(spec("t1"), { logger });
    machines.push(t1);
    const { where, migration } = await preparedTls(t1);

    const refused = await source.migrateTo({ ...where, secret: "0".repeat(64) }, migration);
    expect(refused.ok).toBe(false);
    expect(refused.failureReason).toMatch(/refused|authentication/);
    expect(source.state).toBe("running");
    expect(t1.state).toBe("created");

    // Throttled to 1 MiB/s so it is still running when canceled.
    const slow = { ...migration, bandwidthBytesPerSec: 1 << 20 };
    const firstProgress = new Promise<void>((r) => source.on("migration-progress", () => r()));
    const canceled = source.migrateTo(where, slow);
    await firstProgress;
    await source.cancelMigration();
    expect(await canceled).toMatchObject({ ok: false, failureReason: "canceled" });
    expect(source.state).toBe("running");

    const t2 = new QemuMachine(spec("t2"), { logger });
    machines.push(t2);
    const { where: where2, migration: toT2 } = await preparedTls(t2); // t2 pinned another source certificate
    const started = new Promise<void>((r) => source.on("migration-progress", () => r()));
    const broken = source.migrateTo(where2, { ...toT2, bandwidthBytesPerSec: 1 << 20 });
    await started;
    await t2.kill();
    const r2 = await broken;
    expect(r2.ok).toBe(false);
    expect(r2.failureReason).toMatch(/failed/);
    expect(source.state).toBe("running");
    const from = sourceConsole.text.length;
    await sourceConsole.waitFor(/count=\d+/, 30_000, from); // still counting here
  });

  it("live-migrates to a target launcher in another process with the counter continuing, then stops gracefully there", async () => {
    const fixture = new URL("./migration-target.fixture.ts", import.meta.url).pathname;
    const tls = await migrationTlsPair();
    const migration = { ...knobs, tls: tls.source };
    const targetTls = JSON.stringify({ tls: tls.target, sourceCertificate: tls.source.certificate });
    const child = spawn(process.execPath, [fixture, JSON.stringify(spec("t3")), targetTls], {
      stdio: ["pipe", "pipe", "inherit"],
    });
    children.push(child);
    type TargetEvent = { event: string; state?: string; reason?: string; text?: string; target?: MigrationTarget };
    const events: TargetEvent[] = [];
    createInterface({ input: child.stdout }).on("line", (l) => events.push(JSON.parse(l) as TargetEvent));
    const next = async (
      pred: (e: (typeof events)[number]) => boolean,
      what: string,
    ): Promise<(typeof events)[number]> => {
      const deadline = Date.now() + 120_000;
      for (;;) {
        const e = events.find(pred);
        if (e) return e;
        if (Date.now() > deadline) throw new Error(`target process never reported ${what}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    const where = (await next((e) => e.event === "target", "its address")).target as MigrationTarget;
    const result = await source.migrateTo(where, migration);
    expect(result).toMatchObject({ ok: true });
    expect(result.downtimeMs).toBeGreaterThanOrEqual(0);
    await next((e) => e.state === "running", "running");
    expect(source.state).toBe("stopped");
    const before = Math.max(...[...sourceConsole.text.matchAll(/count=(\d+)/g)].map((m) => Number(m[1])));
    const targetText = (): string => events.map((e) => e.text ?? "").join("");
    const deadline = Date.now() + 60_000;
    while (!/count=\d+/.test(targetText()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const after = Number(/count=(\d+)/.exec(targetText())?.[1]);
    expect(after).toBeGreaterThan(before);
    expect(after).toBeLessThan(before + 100); // kept counting, not restarted and not lost

    // Graceful stop of the migrated guest: its init powers off on the ACPI button / Ctrl-Alt-Del, within the grace.
    child.stdin.write("shutdown 60000\n");
    const stopped = await next((e) => e.state === "stopped" || e.state === "crashed", "the end of the guest");
    expect(stopped).toMatchObject({ state: "stopped", reason: "guest powered off" });
  });
});

describe("QemuMachine disks on the sata and scsi buses (real QEMU, TCG, demo image)", { timeout: 240_000 }, () => {
  it("reads cloud-init from a SATA CD-ROM and writes a SCSI disk the guest finds by its serial", async () => {
    execFileSync(process.execPath, [join(root, "tools/images/src/cli.ts")], { stdio: "inherit" });
    const dir = mkdtempSync(join(tmpdir(), "kvt-qemu-bus-"));
    const boot = imageStoreResolver(process.env.KVT_IMAGE_STORE ?? join(root, ".data/images"))(
      "local/demo-linux:latest",
    );
    const iso = join(dir, "cidata.iso");
    const identity = { name: "vm-bus", namespace: "default", firmwareUuid: "5d307ca9-b3ef-428c-8861-06e72d69f224" };
    writeFileSync(iso, buildNoCloudDisk({ userData: USER_DATA }, identity, { timestamp: new Date(0) }));
    const data = join(dir, "data.img");
    writeFileSync(data, Buffer.alloc(1 << 20));
    const machine = new QemuMachine(
      {
        vmiKey: "default/vm-bus",
        memoryBytes: 256 * 1024 * 1024,
        vcpus: 1,
        boot,
        disks: [
          {
            name: "cloudinit",
            path: iso,
            readOnly: true,
            kind: "cloudInitNoCloud",
            shared: true,
            bus: "sata",
            cdrom: true,
          },
          { name: "data", path: data, readOnly: false, kind: "emptyDisk", shared: false, bus: "scsi", serial: "SCSI1" },
        ],
        workDir: join(dir, "w"),
      },
      { logger },
    );
    const console = new ConsoleWatch(machine);
    try {
      await machine.start();
      await console.waitFor(/printed from cloud-init userdata/, 120_000);
      const from = console.text.length;
      // The SCSI disk by its serial (sysfs), written with a marker the host then reads from the file.
      machine.writeConsole(
        Buffer.from(
          // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell parameter expansion, not a template
          'for b in /sys/block/sd*; do grep -q SCSI1 $b/device/vpd_pg80 2>/dev/null && D=/dev/${b##*/}; done; echo kvt-$((40+2)) | dd of=$D conv=sync,fsync 2>/dev/null; echo "W=$? D=$D"\n',
        ),
      );
      const w = await console.waitFor(/W=(\d+) D=(\S*)\r?\n/, 30_000, from);
      expect(w[1]).toBe("0");
      expect(w[2]).toMatch(/^\/dev\/sd[a-z]$/);
      expect(readFileSync(data).subarray(0, 7).toString()).toBe("kvt-42\n");
    } finally {
      await machine.kill();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
