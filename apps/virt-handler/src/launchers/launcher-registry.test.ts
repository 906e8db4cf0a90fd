import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type DomainInfo,
  LauncherServer,
  type LauncherService,
  launcherSocketPath,
  podSocketDir,
  podSocketPath,
} from "@kvt/launcher-rpc";
import { createLogger } from "@kvt/observability";
import { afterEach, describe, expect, it } from "vitest";
import { LauncherRegistry, podLauncherSockets } from "./launcher-registry.ts";

const logger = createLogger({ component: "test", level: "silent" });
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/**
 * A launcher that only answers /v1/info (and the event stream the registry follows), listening in `dir` as a
 * launcher run by hand does, or at `socketPath`.
 */
async function fakeLauncher(
  dir: string,
  uid: string,
  delayFirstInfoMs = 0,
  slowAnswers = 1,
  socketPath = launcherSocketPath(dir, uid.padEnd(16, "0")),
): Promise<LauncherServer> {
  const info: DomainInfo = {
    protocolVersion: "v1",
    vmi: { namespace: "default", name: uid, uid },
    pod: {},
    pid: process.pid,
    state: "NoDomain",
  };
  let calls = 0;
  const answers: Partial<LauncherService> = {
    // A busy launcher: its first answer comes after the registry's 2 s info deadline (the server awaits what the
    // GET handler returns; later calls, the event stream's snapshot among them, answer at once).
    info: (() =>
      calls++ < slowAnswers && delayFirstInfoMs > 0
        ? new Promise<DomainInfo>((r) => setTimeout(() => r(info), delayFirstInfoMs))
        : info) as () => DomainInfo,
  };
  const service = new Proxy(answers, {
    get: (target, key) =>
      key in target ? target[key as "info"] : () => Promise.reject(new Error(`${String(key)}: not in this fake`)),
  }) as LauncherService;
  const server = new LauncherServer({ socketPath, service, logger });
  await server.listen();
  cleanups.push(() => server.close());
  return server;
}

describe("LauncherRegistry", () => {
  it("adopts a launcher as soon as its socket appears, not at the next periodic scan", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kvt-reg-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const changed: string[] = [];
    const registry = new LauncherRegistry({
      socketDirs: [dir],
      logger,
      onChange: (uid) => changed.push(uid),
      scanIntervalMs: 600_000, // the periodic scan never comes during this test
    });
    await registry.start();
    cleanups.push(() => registry.stop());
    expect(registry.synced).toBe(true);
    expect(registry.all()).toEqual([]);

    await fakeLauncher(dir, "aaaa1111");
    await expect.poll(() => changed, { timeout: 3000, interval: 10 }).toContain("aaaa1111");
    expect(registry.forVmi("aaaa1111")[0]?.info.state).toBe("NoDomain");

    await fakeLauncher(dir, "bbbb2222"); // and the next one too
    await expect.poll(() => registry.forVmi("bbbb2222").length, { timeout: 3000, interval: 10 }).toBe(1);
  });

  it("is not synced while a launcher found at start is too busy to answer: it waits for its answer", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kvt-reg-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    await fakeLauncher(dir, "cccc3333", 2500);
    const registry = new LauncherRegistry({ socketDirs: [dir], logger, onChange: () => {}, scanIntervalMs: 600_000 });
    let done = false;
    const started = registry.start().then(() => {
      done = true;
    });
    cleanups.push(() => registry.stop());
    // At no moment may the registry say "synced" (no launcher = a fact) without the busy launcher tracked.
    const wrong: number[] = [];
    const t0 = Date.now();
    while (!done) {
      if (registry.synced && registry.forVmi("cccc3333").length === 0) wrong.push(Date.now() - t0);
      await new Promise((r) => setTimeout(r, 10));
    }
    await started;
    expect(wrong).toEqual([]);
    expect(Date.now() - t0).toBeGreaterThan(2000); // it did wait past the first answer's deadline
    expect(registry.synced).toBe(true);
    expect(registry.forVmi("cccc3333")).toHaveLength(1);
  });

  it("is not synced while its retry of a busy launcher is still waiting for the answer", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kvt-reg-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    // Busy for its first two answers: the registry's own retry (100 ms after the first deadline) is still asking
    // when start() scans again, and that scan must not take "being asked" for "absent".
    await fakeLauncher(dir, "dddd4444", 2500, 2);
    const registry = new LauncherRegistry({ socketDirs: [dir], logger, onChange: () => {}, scanIntervalMs: 600_000 });
    let done = false;
    const started = registry.start().then(() => {
      done = true;
    });
    cleanups.push(() => registry.stop());
    const wrong: number[] = [];
    const t0 = Date.now();
    while (!done) {
      if (registry.synced && registry.forVmi("dddd4444").length === 0) wrong.push(Date.now() - t0);
      await new Promise((r) => setTimeout(r, 10));
    }
    await started;
    expect(wrong).toEqual([]);
    expect(registry.forVmi("dddd4444")).toHaveLength(1);
  }, 20_000);

  it.each([
    { launcher: "lives", pid: process.pid, gone: false },
    { launcher: "has exited", pid: spawnSync("true").pid ?? 0, gone: true },
  ])(
    "a broken event stream of a launcher that $launcher: gone $gone",
    async ({ pid, gone }) => {
      const dir = mkdtempSync(join(tmpdir(), "kvt-reg-"));
      cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
      const info: DomainInfo = {
        protocolVersion: "v1",
        vmi: { namespace: "default", name: "eeee5555", uid: "eeee5555" },
        pod: {},
        pid,
        state: "Running",
      };
      // A launcher whose event stream connection drops (reset) a moment after its snapshot, every time.
      let streams = 0;
      const server = createServer((req, res) => {
        if (req.url === "/v1/info") return void res.end(JSON.stringify(info));
        streams++;
        res.writeHead(200, { "content-type": "application/x-ndjson" });
        res.write(`${JSON.stringify({ type: "domain", info, seq: 1, time: new Date().toISOString() })}\n`);
        setTimeout(() => req.socket.destroy(), 100);
      });
      await new Promise<void>((r) => server.listen(launcherSocketPath(dir, "eeee5555".padEnd(16, "0")), r));
      cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
      const registry = new LauncherRegistry({ socketDirs: [dir], logger, onChange: () => {}, scanIntervalMs: 600_000 });
      await registry.start();
      cleanups.push(() => registry.stop());
      expect(registry.forVmi("eeee5555")).toHaveLength(1);
      if (gone) {
        await expect.poll(() => registry.forVmi("eeee5555")[0]?.gone, { timeout: 3000 }).toBe(true);
      } else {
        // Followed again after each break, and never reported gone (which would fail its VMI).
        await expect.poll(() => streams, { timeout: 5000 }).toBeGreaterThanOrEqual(3);
        expect(registry.forVmi("eeee5555")[0]?.gone).toBe(false);
      }
    },
    20_000,
  );

  it("starts watching a socket directory that appears after it started", async () => {
    const parent = mkdtempSync(join(tmpdir(), "kvt-reg-"));
    cleanups.push(() => rmSync(parent, { recursive: true, force: true }));
    const dir = join(parent, "sockets");
    const registry = new LauncherRegistry({ socketDirs: [dir], logger, onChange: () => {}, scanIntervalMs: 50 });
    await registry.start();
    cleanups.push(() => registry.stop());
    mkdirSync(dir);
    await fakeLauncher(dir, "cccc3333");
    await expect.poll(() => registry.forVmi("cccc3333").length, { timeout: 3000, interval: 10 }).toBe(1);
  });

  it("finds launchers through the kubelet's pods directory, in each launcher pod's sockets emptyDir", async () => {
    const pods = mkdtempSync(join(tmpdir(), "kvt-reg-"));
    cleanups.push(() => rmSync(pods, { recursive: true, force: true }));
    // A launcher pod already listening, and a pod that is no launcher (no sockets volume).
    mkdirSync(podSocketDir(pods, "pod-a"), { recursive: true });
    await fakeLauncher(pods, "vmi-a", 0, 0, podSocketPath(pods, "pod-a"));
    mkdirSync(join(pods, "pod-web", "volumes"), { recursive: true });
    const registry = new LauncherRegistry({ podsDir: pods, logger, onChange: () => {}, scanIntervalMs: 600_000 });
    await registry.start();
    cleanups.push(() => registry.stop());
    expect(registry.forVmi("vmi-a").map((v) => v.socketPath)).toEqual([podSocketPath(pods, "pod-a")]);

    // A pod that appears later: its sockets directory first (the kubelet's volumes), then its launcher's socket.
    mkdirSync(podSocketDir(pods, "pod-b"), { recursive: true });
    await expect.poll(() => podLauncherSockets(pods).socketDirs.length).toBe(2);
    await new Promise((r) => setTimeout(r, 100)); // the scan the new pod directory triggered
    await fakeLauncher(pods, "vmi-b", 0, 0, podSocketPath(pods, "pod-b"));
    await expect.poll(() => registry.forVmi("vmi-b").length, { timeout: 3000, interval: 10 }).toBe(1);
  });
});

describe("podLauncherSockets()", () => {
  it("lists each pod's sockets emptyDir and the launcher-sock in it, as KubeVirt's SocketFilePathOnHost", () => {
    const pods = mkdtempSync(join(tmpdir(), "kvt-reg-"));
    cleanups.push(() => rmSync(pods, { recursive: true, force: true }));
    expect(podLauncherSockets(join(pods, "absent"))).toEqual({ socketDirs: [], sockets: [] });
    mkdirSync(podSocketDir(pods, "uid-1"), { recursive: true });
    writeFileSync(podSocketPath(pods, "uid-1"), ""); // the name is what is looked for; /v1/info proves the rest
    mkdirSync(podSocketDir(pods, "uid-2"), { recursive: true }); // a launcher not listening yet
    mkdirSync(join(pods, "uid-3"));
    mkdirSync(join(pods, ".hidden", "volumes", "kubernetes.io~empty-dir", "sockets"), { recursive: true });
    expect(podLauncherSockets(pods)).toEqual({
      socketDirs: [podSocketDir(pods, "uid-1"), podSocketDir(pods, "uid-2")],
      sockets: [join(pods, "uid-1/volumes/kubernetes.io~empty-dir/sockets/launcher-sock")],
    });
  });
});
