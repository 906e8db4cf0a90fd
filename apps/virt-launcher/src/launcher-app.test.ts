import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { VirtualMachineInstance } from "@kvt/api";
import { LauncherClient, type LauncherEvent, launcherSocketPath } from "@kvt/launcher-rpc";
import { createLogger } from "@kvt/observability";
import { afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { FakeMachine } from "./domain/fake-machine.ts";
import { type LauncherApp, startLauncherApp } from "./launcher-app.ts";
import type { MachineSpec, MigrationTlsIdentity } from "./machine/machine.ts";
import { migrationTlsPair } from "./machine/migration-tls.test-util.ts";

const logger = createLogger({ component: "test", level: "silent" });
/** A migrate request's options, KubeVirt's defaults but a 300 ms downtime. */
const MIGRATE_OPTIONS = {
  bandwidthBytesPerSec: 0,
  maxDowntimeMs: 300,
  allowAutoConverge: false,
  allowPostCopy: false,
  completionTimeoutPerGiB: 150,
  progressTimeoutSeconds: 150,
};
/** The same with KubeVirt's migrations.disableTLS (no certificates), and a target for it. */
const PLAIN_OPTIONS = { ...MIGRATE_OPTIONS, disableTLS: true };
const PLAIN_TARGET = { host: "127.0.0.1", port: 1, secret: "s" };
/** The per-migration identities the handlers would mint. */
let TLS: { source: MigrationTlsIdentity; target: MigrationTlsIdentity };
beforeAll(async () => {
  TLS = await migrationTlsPair();
});
const vmi = {
  metadata: { name: "vm1", namespace: "default", uid: "vmi-uid-1" },
  spec: { domain: { devices: {} } },
} as VirtualMachineInstance;
const spec: MachineSpec = {
  vmiKey: "default/vm1",
  memoryBytes: 2 * 2 ** 30,
  vcpus: 1,
  boot: { kernelPath: "/k", cmdline: "", pvmSafe: true },
  workDir: "/tmp",
};

let dir: string;
let machine: FakeMachine;
let app: LauncherApp;
let client: LauncherClient;
let events: LauncherEvent[];
let stopEvents: AbortController;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), "kvt-launcher-"));
  machine = new FakeMachine();
  app = await startLauncherApp({
    identity: { namespace: "default", name: "vm1", uid: "vmi-uid-1", podName: "virt-launcher-vm1-x", podUid: "pod-1" },
    socketPath: launcherSocketPath(dir, "pod-1"),
    consoleLogPath: join(dir, "virt-serial0-log"),
    toSpec: () => spec,
    createMachine: async () => ({ machine, emulated: false, reason: "test" }),
    logger,
  });
  client = new LauncherClient(launcherSocketPath(dir, "pod-1"), { timeoutMs: 2000 });
  events = [];
  stopEvents = new AbortController();
  void client.watchEvents((e) => events.push(e), stopEvents.signal).catch(() => {});
  await expect.poll(() => events.length).toBe(1);
});

afterEach(async () => {
  stopEvents.abort();
  await app.close();
  rmSync(dir, { recursive: true, force: true });
});

const transitions = (): string[] => events.flatMap((e) => (e.type === "domain" ? [e.transition] : []));

describe("virt-launcher over launcher-rpc", () => {
  it("sync without a VMI from start-up or request is a BadRequest", async () => {
    await expect(client.sync()).rejects.toMatchObject({ code: "BadRequest" });
  });

  it("sync boots the guest once; pause/unpause follow the machine; shutdown finishes with success", async () => {
    const info = await client.sync({ vmi: vmi as unknown as Record<string, unknown> });
    expect(info).toMatchObject({ state: "Running", backend: "native", emulated: false, pod: { uid: "pod-1" } });
    await client.sync();
    expect(machine.calls.filter((c) => c === "start")).toHaveLength(1);
    await client.pause();
    expect((await client.info()).state).toBe("Paused");
    await expect(client.pause()).rejects.toMatchObject({ code: "Conflict" });
    await client.unpause();
    await client.shutdown({ gracePeriodSeconds: 3 });
    expect(machine.calls).toContain("shutdown 3000");
    await expect(app.finished).resolves.toEqual({ state: "Shutdown", reason: "GuestShutdown" });
    await expect.poll(transitions).toEqual(["snapshot", "started", "paused", "resumed", "shutdown"]);
  });

  it("a VMI with startStrategy Paused starts its machine paused and reports Paused until unpaused", async () => {
    const pausedVmi = { ...vmi, spec: { ...vmi.spec, startStrategy: "Paused" } };
    expect((await client.sync({ vmi: pausedVmi as unknown as Record<string, unknown> })).state).toBe("Paused");
    expect(machine.calls).toEqual(["start paused"]);
    await client.unpause();
    expect((await client.info()).state).toBe("Running");
    await expect.poll(transitions).toEqual(["snapshot", "started", "paused", "resumed"]);
  });

  it("a guest crash is a failure outcome with its reason", async () => {
    await client.sync({ vmi: vmi as unknown as Record<string, unknown> });
    machine.setState("crashed", "vcpu exit: triple fault");
    await expect(app.finished).resolves.toEqual({ state: "Crashed", reason: "vcpu exit: triple fault" });
  });

  it("the console replays output, takes input, and is written to the console log", async () => {
    await client.sync({ vmi: vmi as unknown as Record<string, unknown> });
    const stream = await client.openConsole();
    let seen = "";
    stream.on("data", (c: Buffer) => {
      seen += c.toString();
    });
    await expect.poll(() => seen).toBe("booted\n");
    stream.write("echo hi\n");
    await expect.poll(() => seen).toBe("booted\necho hi\n");
    stream.destroy();
    expect(readFileSync(join(dir, "virt-serial0-log"), "utf8")).toBe("booted\necho hi\n");
  });

  it("migrates as the source: progress and result reach the handler, success ends the launcher", async () => {
    await client.sync({ vmi: vmi as unknown as Record<string, unknown> });
    const options = { ...MIGRATE_OPTIONS, allowAutoConverge: true };
    const target = { host: "127.0.0.1", port: 1, secret: "s", certificate: TLS.target.certificate };
    await client.migrate({ migrationUid: "m1", target, options, tls: TLS.source });
    expect(machine.lastMigrationOptions).toEqual({
      bandwidthBytesPerSec: 0,
      maxDowntimeMs: 300,
      allowAutoConverge: true,
      completionTimeoutSec: 450, // KubeVirt: 150 s x ceil(2 GiB / 1 GB) = 150 s x 3
      progressTimeoutSec: 150,
      tls: TLS.source, // KubeVirt's migrations.disableTLS is off: this launcher's identity from its handler
    });
    const progress = {
      iteration: 1,
      processedBytes: 10,
      remainingBytes: 5,
      dirtyRateBytesPerSec: 1,
      transferRateBytesPerSec: 2,
      expectedDowntimeMs: 3,
      throttle: 0,
    };
    machine.emitProgress(progress);
    machine.finishMigration({ ok: true, downtimeMs: 4, totalSeconds: 0.5, bytesSent: 100, iterations: 2 });
    await expect(app.finished).resolves.toMatchObject({ state: "Migrated" });
    await expect
      .poll(() => events.map((e) => e.type))
      .toEqual(["domain", "domain", "migration-progress", "migration-result", "domain"]);
    expect((await client.info()).migration).toMatchObject({ migrationUid: "m1", role: "source", phase: "Succeeded" });
  });

  it("a cancelled migration leaves the guest running here", async () => {
    await client.sync({ vmi: vmi as unknown as Record<string, unknown> });
    await client.migrate({ migrationUid: "m2", target: PLAIN_TARGET, options: PLAIN_OPTIONS });
    expect(machine.lastMigrationOptions?.tls).toBe(false);
    await client.cancelMigration({ migrationUid: "m2" });
    await expect.poll(async () => (await client.info()).migration?.phase).toBe("Failed");
    const info = await client.info();
    expect(info.state).toBe("Running");
    expect(info.migration?.result?.failureReason).toBe("canceled");
  });

  it("a guest that shuts down while it migrates out: the migration fails with the reason, then the domain is Shutdown", async () => {
    await client.sync({ vmi: vmi as unknown as Record<string, unknown> });
    await client.migrate({ migrationUid: "m5", target: PLAIN_TARGET, options: PLAIN_OPTIONS });
    machine.setState("stopped", "GuestShutdown: exit code 0"); // the migration decides: still Running here
    expect((await client.info()).state).toBe("Running");
    const failureReason = "the guest ended during the migration: GuestShutdown: exit code 0";
    machine.finishMigration({ ok: false, failureReason, totalSeconds: 1, bytesSent: 0, iterations: 1 });
    await expect(app.finished).resolves.toEqual({ state: "Shutdown", reason: "GuestShutdown: exit code 0" });
    await expect.poll(transitions).toContain("shutdown");
    const result = events.find((e) => e.type === "migration-result");
    expect(result).toMatchObject({ migrationUid: "m5", result: { ok: false, failureReason } });
    expect(transitions().at(-1)).toBe("shutdown");
    expect(events.findIndex((e) => e.type === "migration-result")).toBeLessThan(events.length - 1);
  });

  it("prepares as a migration target with its TLS identity, pins the source's certificate, runs once the incoming migration completes", async () => {
    await expect(
      client.sourceCertificate({ migrationUid: "m3", certificate: TLS.source.certificate }),
    ).rejects.toMatchObject({ code: "NotFound" }); // nothing prepared yet
    const target = await client.prepareTarget({ migrationUid: "m3", vmi: vmi, tls: TLS.target });
    expect(target).toEqual({
      host: "127.0.0.1",
      port: 45_000,
      secret: "one-time",
      certificate: TLS.target.certificate,
    });
    expect(machine.lastIncoming).toEqual({ tls: TLS.target });
    await client.sourceCertificate({ migrationUid: "m3", certificate: TLS.source.certificate });
    expect(machine.trustedSources).toEqual([TLS.source.certificate]);
    await expect(
      client.sourceCertificate({ migrationUid: "other", certificate: TLS.source.certificate }),
    ).rejects.toMatchObject({ code: "NotFound" });
    expect((await client.info()).state).toBe("IncomingMigration");
    machine.setState("running");
    await expect.poll(async () => (await client.info()).state).toBe("Running");
    expect((await client.info()).migration).toMatchObject({ role: "target", phase: "Succeeded" });
    expect(transitions()).toEqual(["snapshot", "incoming-ready", "incoming-completed"]);
  });

  it("a repeated prepare (its handler restarted before publishing the secret) gets the same answer", async () => {
    const first = await client.prepareTarget({ migrationUid: "m4", vmi: vmi, tls: TLS.target });
    // The restarted handler minted another identity: the launcher keeps (and answers) the first.
    const again = await client.prepareTarget({ migrationUid: "m4", vmi: vmi, tls: TLS.source });
    expect(again).toEqual(first);
    expect(again.certificate).toBe(TLS.target.certificate);
    expect(machine.calls.filter((c) => c === "prepareIncoming")).toHaveLength(1);
    await expect(client.prepareTarget({ migrationUid: "m5", vmi: vmi, tls: TLS.target })).rejects.toMatchObject({
      code: "Conflict",
    });
  });

  it("a prepare repeated while the first is under way (its handler restarted) shares it: one machine", async () => {
    machine.incomingDelayMs = 300; // the second request arrives while the first still sets up its listener
    const [a, b] = await Promise.all([
      client.prepareTarget({ migrationUid: "m6", vmi: vmi, tls: TLS.target }),
      client.prepareTarget({ migrationUid: "m6", vmi: vmi, tls: TLS.target }),
    ]);
    expect(b).toEqual(a);
    expect(machine.calls.filter((c) => c === "prepareIncoming")).toHaveLength(1);
  });
});
