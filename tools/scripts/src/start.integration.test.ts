/**
 * The main job's stop, as a user does it: `npm start` in a terminal, then Ctrl-C. The terminal sends SIGINT to the
 * whole foreground process group (npm, and the start script under it), and npm forwards its own copy too: the
 * cluster must stop cleanly anyway. After the exit nothing of that cluster may be left: no process whose command
 * line or working directory is under its data directory (API server, scheduler, kubelets, virt-* components, the demo
 * VM's launcher and QEMU), no lock file, no pod network bridge.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually } from "@kvt/testing";
import { afterAll, describe, expect, it } from "vitest";

const root = new URL("../../../", import.meta.url).pathname;
const dataDir = realpathSync(mkdtempSync(join(tmpdir(), "kvt-start-stop-")));
let child: ChildProcess | undefined;

afterAll(() => {
  // A failed case must not leave a cluster running: stop the whole group, then the directory.
  if (child?.pid && child.exitCode === null) {
    try {
      process.kill(-child.pid, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
  rmSync(dataDir, { recursive: true, force: true });
});

/** Pids of processes whose command line or working directory names `dir`. */
function processesUnder(dir: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, "utf8");
      const cwd = readlinkSync(`/proc/${entry}/cwd`);
      if (argv.includes(dir) || cwd.startsWith(dir)) found.push(Number(entry));
    } catch {
      // Gone while we looked.
    }
  }
  return found;
}

/** The command lines of `pids`, for a failure's message. */
function commandLines(pids: readonly number[]): string {
  return pids
    .map((p) => {
      try {
        return `${p}: ${readFileSync(`/proc/${p}/cmdline`, "utf8").replaceAll("\0", " ").slice(0, 160)}`;
      } catch {
        return `${p}: (gone)`;
      }
    })
    .join("\n");
}

describe.runIf(process.getuid?.() === 0)("npm start, then Ctrl-C", () => {
  it("stops the cluster and the demo VM cleanly, leaving no process, lock or bridge behind", async () => {
    let out = "";
    child = spawn("npm", ["start", "--", "--data-dir", dataDir, "--nodes", "1"], {
      cwd: root,
      // Its own process group: the test plays the terminal, which signals the foreground job as a whole.
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, NO_COLOR: "1" },
    });
    child.stdout?.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr?.on("data", (d: Buffer) => (out += d.toString()));
    // "close": every holder of its stdout is gone, the start script (which outlives npm on a Ctrl-C) included.
    const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child?.on("close", (code, signal) => resolve({ code, signal })),
    );

    await eventually(() => out.includes("Press Ctrl-C"), { timeoutMs: 240_000, intervalMs: 250 }).catch(() => {
      throw new Error(`npm start did not say the cluster is up in 240 s; its output:\n${out}`);
    });
    const bridge = /on bridge (\S+)/.exec(out)?.[1];
    expect(bridge, out).toBeDefined();
    expect(existsSync(`/sys/class/net/${bridge}`)).toBe(true);
    // The demo VM's launcher is up too (a pod process under the data directory's nodes/).
    await eventually(
      () =>
        processesUnder(join(dataDir, "nodes")).some((p) =>
          readFileSync(`/proc/${p}/cmdline`, "utf8").includes("virt-launcher"),
        ),
      { timeoutMs: 90_000, intervalMs: 250, what: "the demo VM's virt-launcher to run" },
    );
    expect(processesUnder(dataDir).length).toBeGreaterThan(5);

    const group = child.pid;
    if (!group) throw new Error("npm start has no pid");
    process.kill(-group, "SIGINT");
    const timeout = new Promise<"timeout">((resolve) => setTimeout(() => resolve("timeout"), 90_000).unref());
    const end = await Promise.race([closed, timeout]);
    if (end === "timeout") throw new Error(`npm start did not end 90 s after Ctrl-C; its output:\n${out}`);
    // npm itself dies of the SIGINT, as in a terminal; the start script under it must have stopped the cluster.
    expect(end.code === 0 || end.signal === "SIGINT", `npm ended with ${JSON.stringify(end)}`).toBe(true);
    expect(out).toMatch(/SIGINT: stopping the local cluster/);
    expect(out).toMatch(/\] stopped\n/);

    const left = await eventually(
      () => {
        const pids = processesUnder(dataDir);
        return pids.length === 0 ? true : undefined;
      },
      { timeoutMs: 10_000, intervalMs: 250 },
    ).catch(() => commandLines(processesUnder(dataDir)));
    expect(left, "processes of the stopped cluster still running").toBe(true);
    expect(existsSync(join(dataDir, "start.lock"))).toBe(false);
    expect(existsSync(`/sys/class/net/${bridge}`), `bridge ${bridge} left behind`).toBe(false);
  }, 420_000);
});
