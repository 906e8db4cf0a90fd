/**
 * Live migration of native-VMM guests through launcher-rpc: two launcher processes (native-launcher.fixture.ts), the
 * source synced with the deterministic test guest, the target prepared; the console logs of both together must equal
 * an unmigrated run line for line. The stream runs over TLS with per-migration certificates (minted here as the
 * handlers mint them, the source's pinned at the target as their exchange does). Cancel, a wrong secret and a source
 * certificate the target was not given leave the guest running on the source.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LauncherClient, type LauncherEvent, type MigrateRequestOptions } from "@kvt/launcher-rpc";
import { createLogger } from "@kvt/observability";
import { FakeVmm, hasKvm, testGuestPath } from "@kvt/vmm";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Machine } from "../machine.ts";
import { migrationTlsPair } from "../migration-tls.test-util.ts";
import { NativeMachine } from "./native-machine.ts";
import { incomingVmOptions } from "./native-migration.ts";

const fixture = new URL("./native-launcher.fixture.ts", import.meta.url).pathname;
const MiB = 2 ** 20;
const options: MigrateRequestOptions = {
  bandwidthBytesPerSec: 0,
  maxDowntimeMs: 50,
  allowAutoConverge: true,
  allowPostCopy: false,
  completionTimeoutPerGiB: 150,
  progressTimeoutSeconds: 150,
};
const WORKLOAD = "ws=8 pattern=random rate=40 seed=7 every=128 lines=120";
/**
 * Inside the nested lane's L1 (TCG) AES-GCM runs at about 75 MB/s, 70x slower than this host's CPU (`openssl speed`
 * in L1 against here), and WORKLOAD ends before an encrypted move completes: the move goes plain there (KubeVirt's
 * migrations.disableTLS at both ends). Everywhere else it is encrypted, as in production.
 */
const PLAIN_IN_L1: { disableTLS?: true } = process.env.KVT_NESTED_L1 === undefined ? {} : { disableTLS: true };
/**
 * A guest that outlives the failed migrations below (15 s of lines): one that ended in the middle would fail the
 * migration for that reason instead (the last case), and under a loaded L1 a handshake alone can take seconds.
 */
const SLOW = "ws=32 pattern=fill rate=0 seed=2 every=2048 tick=50 lines=300";

describe("NativeMachine migration (fake VMM)", () => {
  const logger = createLogger({ component: "test", level: "silent" });
  const spec = {
    vmiKey: "default/guest",
    memoryBytes: 64 * MiB,
    vcpus: 1,
    boot: { kernelPath: testGuestPath(), cmdline: "ws=4", pvmSafe: true },
    workDir: tmpdir(),
  };

  it("is live-migratable; a VMM without a migration stream refuses to prepare and leaves the machine unbuilt", async () => {
    const vmm = new FakeVmm();
    const m: Machine = new NativeMachine(spec, vmm, logger);
    expect(m.notMigratableReason).toBeUndefined();
    await expect(m.prepareIncoming({ tls: false })).rejects.toThrow(/no migration stream/);
    expect(m.state).toBe("created");
    expect(vmm.vms[0]?.state).toBe("stopped");
    await m.start();
    expect(m.state).toBe("running");
    await expect(
      m.migrateTo({ host: "127.0.0.1", port: 1, secret: "x".repeat(32) }, toMachine(options)),
    ).rejects.toThrow(/no migration stream/);
    expect(m.state).toBe("running");
  });

  it("a target is the source's machine without a loaded ELF kernel (memory and vCPU state arrive)", () => {
    expect(incomingVmOptions({ memoryBytes: 64 * MiB, vcpus: 2, kernel: { path: "/k", cmdline: "" } })).toEqual({
      memoryBytes: 64 * MiB,
      vcpus: 2,
    });
  });
});

function toMachine(o: MigrateRequestOptions) {
  return {
    bandwidthBytesPerSec: o.bandwidthBytesPerSec,
    maxDowntimeMs: o.maxDowntimeMs,
    allowAutoConverge: o.allowAutoConverge,
    completionTimeoutSec: o.completionTimeoutPerGiB,
    progressTimeoutSec: o.progressTimeoutSeconds,
    tls: false as const,
  };
}

/** One launcher process and what it reported. */
interface Launcher {
  readonly client: LauncherClient;
  readonly events: LauncherEvent[];
  readonly exited: Promise<number | null>;
  readonly child: ChildProcess;
  console(): string;
  /** The launcher's own log lines (JSON). */
  log(): string;
}

let dir = "";
const children: ChildProcess[] = [];
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "kvt-nmig-"));
  return () => rmSync(dir, { recursive: true, force: true });
});
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
});

let seq = 0;
async function launcher(cmdline: string): Promise<Launcher> {
  const n = seq++;
  const socketPath = join(dir, `l${n}.sock`);
  const logPath = join(dir, `l${n}.log`);
  const launcherLog = openSync(`${logPath}.launcher`, "w");
  const child = spawn(process.execPath, [fixture, socketPath, logPath, cmdline], {
    stdio: ["ignore", launcherLog, "inherit"],
  });
  closeSync(launcherLog);
  children.push(child);
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const client = new LauncherClient(socketPath, { timeoutMs: 20_000 });
  await expect
    .poll(
      () =>
        client.info().then(
          () => true,
          () => false,
        ),
      { timeout: 60_000, interval: 100 },
    )
    .toBe(true);
  const events: LauncherEvent[] = [];
  void client.watchEvents((e) => events.push(e)).catch(() => {});
  const console = (): string => textOf(logPath, "latin1");
  const log = (): string => textOf(`${logPath}.launcher`, "utf8");
  return { client, events, exited, child, console, log };
}

/** A file's text, "" while it does not exist yet. */
function textOf(path: string, encoding: BufferEncoding): string {
  try {
    return readFileSync(path, encoding);
  } catch {
    return "";
  }
}

const lines = (text: string): number => text.split("\n").length - 1;

/** A launcher's exit code, or a failure naming `what` after `ms` (a bare await would end only in the test's timeout). */
async function exitOf(l: Launcher, what: string, ms = 60_000): Promise<number | null> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not exit within ${ms / 1000} s`)), ms);
  });
  try {
    return await Promise.race([l.exited, late]);
  } finally {
    clearTimeout(timer);
  }
}

const baselines = new Map<string, Promise<string>>();
/** The console of an unmigrated launcher run of `cmdline`. */
function baseline(cmdline: string): Promise<string> {
  let b = baselines.get(cmdline);
  if (!b) {
    b = (async () => {
      const l = await launcher(cmdline);
      await l.client.sync();
      expect(await exitOf(l, "the unmigrated baseline launcher", 120_000)).toBe(0);
      return l.console();
    })();
    baselines.set(cmdline, b);
  }
  return b;
}

function resultOf(l: Launcher, uid: string): LauncherEvent & { type: "migration-result" } {
  const e = l.events.find((x) => x.type === "migration-result" && x.migrationUid === uid);
  if (e?.type !== "migration-result") throw new Error(`no migration-result for ${uid} yet`);
  return e;
}

/** The source's migration result, waited for; without one in `ms`, an error with the tail of the launcher's log. */
async function resultWithin(
  l: Launcher,
  uid: string,
  ms = 60_000,
): Promise<LauncherEvent & { type: "migration-result" }> {
  try {
    await expect.poll(() => resultOf(l, uid), { timeout: ms }).toBeTruthy();
  } catch (error) {
    const tail = l.log().trimEnd().split("\n").slice(-40).join("\n");
    const exit = l.child.exitCode ?? l.child.signalCode ?? "running";
    throw new Error(`${(error as Error).message}; the source launcher (${exit}) logged last:\n${tail}`, {
      cause: error,
    });
  }
  return resultOf(l, uid);
}

describe.skipIf(!hasKvm())("native live migration between two launcher processes (real KVM)", () => {
  /**
   * Every identity the cases use, minted before any launcher runs: under L1's TCG minting takes long enough for a
   * running guest to finish its lines (and its launcher to exit) in the meantime.
   */
  const identities = new Map<string, Awaited<ReturnType<typeof migrationTlsPair>>>();
  beforeAll(async () => {
    for (const uid of ["m1", "m2", "m3", "m4", "m5", "stranger"]) identities.set(uid, await migrationTlsPair());
  }, 120_000);
  const tlsFor = (uid: string) => identities.get(uid)!;

  it("moves the running guest: progress events, Migrated source (exit 0), the console continues on the target", async () => {
    const expected = baseline(WORKLOAD);
    const source = await launcher(WORKLOAD);
    const target = await launcher(WORKLOAD);
    const tls = tlsFor("m1");
    await source.client.sync();
    await expect.poll(() => lines(source.console()), { timeout: 60_000 }).toBeGreaterThanOrEqual(20);
    expect((await source.client.info()).notMigratableReason).toBeUndefined();
    const address = await target.client.prepareTarget({ migrationUid: "m1", tls: tls.target, ...PLAIN_IN_L1 });
    expect(address.secret).toMatch(/^[0-9a-f]{64}$/);
    expect(address.certificate).toBe(PLAIN_IN_L1.disableTLS ? undefined : tls.target.certificate);
    expect((await target.client.info()).state).toBe("IncomingMigration");
    if (!PLAIN_IN_L1.disableTLS)
      await target.client.sourceCertificate({ migrationUid: "m1", certificate: tls.source.certificate });
    await source.client.migrate({
      migrationUid: "m1",
      target: address,
      options: { ...options, ...PLAIN_IN_L1 },
      tls: tls.source,
    });
    const { result } = await resultWithin(source, "m1");
    expect(result).toMatchObject({ ok: true });
    expect(result.downtimeMs).toBeGreaterThan(0);
    expect(result.iterations).toBeGreaterThanOrEqual(2);
    expect(source.events.some((e) => e.type === "migration-progress" && e.migrationUid === "m1")).toBe(true);
    expect(await exitOf(source, "the migrated source launcher")).toBe(0);
    // From the target's event stream, not a live info(): where the move is slow (L1) the guest may finish its lines
    // and the target launcher exit, its socket gone, before an info() could be asked.
    const targetStates = (): string[] => target.events.flatMap((e) => (e.type === "domain" ? [e.info.state] : []));
    await expect.poll(() => targetStates().find((s) => /Running|Shutdown/.test(s)), { timeout: 10_000 }).toBeDefined();
    expect(await exitOf(target, "the target launcher (its guest finishing its lines)")).toBe(0);
    expect(lines(target.console())).toBeGreaterThan(0);
    expect((source.console() + target.console()).split("\n")).toEqual((await expected).split("\n"));
  }, 180_000);

  it.each([
    ["a cancel", "m2", "cancel", /^canceled$/],
    ["a wrong secret", "m3", "secret", /authentication failed/],
    [
      "a source certificate the target was not given",
      "m4",
      "certificate",
      /the peer refused this side's certificate \(TLS alert (bad_certificate|certificate_unknown)/,
    ],
  ] as const)(
    "%s fails the migration and the guest runs on in the source launcher",
    async (_what, uid, how, why) => {
      const cancel = how === "cancel";
      const expected = baseline(SLOW);
      const source = await launcher(SLOW);
      const target = await launcher(SLOW);
      await source.client.sync();
      await expect.poll(() => lines(source.console()), { timeout: 60_000 }).toBeGreaterThanOrEqual(8);
      const tls = tlsFor(uid);
      const address = await target.client.prepareTarget({ migrationUid: uid, tls: tls.target });
      await target.client.sourceCertificate({ migrationUid: uid, certificate: tls.source.certificate });
      const to = how === "secret" ? { ...address, secret: `${address.secret.slice(0, -4)}beef` } : address;
      // "certificate": the source presents one its handler never sent the target's (a stranger's).
      const mine = how === "certificate" ? tlsFor("stranger").source : tls.source;
      await source.client.migrate({
        migrationUid: uid,
        target: to,
        options: { ...options, bandwidthBytesPerSec: 8 * MiB },
        tls: mine,
      });
      if (cancel) {
        await new Promise((r) => setTimeout(r, 300));
        await source.client.cancelMigration({ migrationUid: uid });
      }
      const { result } = await resultWithin(source, uid);
      expect(result.ok).toBe(false);
      expect(result.failureReason).toMatch(why);
      // The source resumes its guest just after it reports the failure: look until it has (bounded).
      await expect
        .poll(() => source.client.info(), { timeout: 10_000 })
        .toMatchObject({ state: "Running", migration: { migrationUid: uid, phase: "Failed" } });
      expect(await exitOf(target, "the failed target launcher")).toBe(1); // its guest never ran
      expect(await exitOf(source, "the source launcher (its guest finishing its lines)")).toBe(0);
      expect(source.console().split("\n")).toEqual((await expected).split("\n"));
    },
    180_000,
  );

  it("a guest that ends mid-migration fails it with that reason; the source reports Shutdown and exits 0", async () => {
    const source = await launcher(SLOW);
    const target = await launcher(SLOW);
    await source.client.sync();
    await expect.poll(() => lines(source.console()), { timeout: 60_000 }).toBeGreaterThanOrEqual(4);
    const tls = tlsFor("m5");
    const address = await target.client.prepareTarget({ migrationUid: "m5", tls: tls.target });
    await target.client.sourceCertificate({ migrationUid: "m5", certificate: tls.source.certificate });
    // 1 MiB/s: the bulk pass of the guest's 32 MiB working set outlasts the guest, which is stopped meanwhile.
    await source.client.migrate({
      migrationUid: "m5",
      target: address,
      options: { ...options, bandwidthBytesPerSec: MiB },
      tls: tls.source,
    });
    await source.client.shutdown({ gracePeriodSeconds: 0 });
    const { result } = await resultWithin(source, "m5");
    expect(result.ok).toBe(false);
    expect(result.failureReason).toMatch(/^the guest ended during the migration: GuestShutdown/);
    expect(await exitOf(source, "the source launcher (its guest stopped mid-migration)")).toBe(0);
    const states = source.events.flatMap((e) => (e.type === "domain" ? [e.info.state] : []));
    expect(states.at(-1)).toBe("Shutdown");
    expect(await exitOf(target, "the failed target launcher")).toBe(1); // its guest never ran
  }, 180_000);
});
