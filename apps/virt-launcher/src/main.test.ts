import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LauncherClient, launcherSocketPath } from "@kvt/launcher-rpc";
import { afterEach, describe, expect, it } from "vitest";
import pkg from "../package.json" with { type: "json" };

const mainPath = new URL("./main.ts", import.meta.url).pathname;
let dir: string | undefined;
let child: ChildProcess | undefined;

afterEach(() => {
  child?.kill("SIGKILL");
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function exitCode(p: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => p.once("exit", (code) => resolve(code)));
}

describe("virt-launcher main", () => {
  it("--help prints the version and a one-line usage and exits 0", () => {
    const out = execFileSync(process.execPath, [mainPath, "--help"], { encoding: "utf8" });
    expect(out).toContain(`virt-launcher ${pkg.version}:`);
    expect(out).toMatch(/^Usage: virt-launcher /m);
  }, 60_000);

  it("starts without loading the Kubernetes API client (the launcher Pod names the VMI; the handler's sync carries it)", () => {
    // A module hook that lists, at exit, every module URL the process loaded.
    const hook = `data:text/javascript,${encodeURIComponent(
      'import { registerHooks } from "node:module"; const seen = [];' +
        "registerHooks({ load(url, ctx, next) { seen.push(url); return next(url, ctx); } });" +
        'process.on("exit", () => process.stderr.write(seen.join("\\n")));',
    )}`;
    const run = spawnSync(process.execPath, ["--import", hook, mainPath, "--namespace", "default", "--name", "x"], {
      encoding: "utf8",
    });
    const loaded = run.stderr.split("\n");
    expect(loaded.some((url) => url.endsWith("/vmi-source.ts"))).toBe(true);
    expect(loaded.filter((url) => url.includes("@kubernetes/client-node") || url.includes("/libs/kube/"))).toEqual([]);
    expect(run.status).toBe(2); // no --uid and no kubeconfig: a usage error, after the start-up imports
  }, 60_000);

  it("exits 2 when the VMI is not named", async () => {
    const p = spawn(process.execPath, [mainPath, "--name", "x"], { stdio: "ignore" });
    expect(await exitCode(p)).toBe(2);
  }, 60_000);

  it("serves launcher-rpc for the VMI file, reports a bad spec on sync, and exits 0 on SIGTERM", async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-lm-"));
    const vmiFile = join(dir, "vmi.json");
    writeFileSync(
      vmiFile,
      JSON.stringify({
        apiVersion: "kubevirt.io/v1",
        kind: "VirtualMachineInstance",
        metadata: { name: "vm1", namespace: "default", uid: "u-1" },
        spec: { domain: { devices: {}, resources: { requests: { memory: "64M" } } }, volumes: [] },
      }),
    );
    child = spawn(process.execPath, [mainPath, "--vmi", vmiFile, "--socket-dir", dir, "--log-level", "silent"], {
      stdio: "ignore",
    });
    const exited = exitCode(child);
    const client = new LauncherClient(launcherSocketPath(dir, "u-1"), { timeoutMs: 2000 });
    await expect
      .poll(async () => (await client.info().catch(() => undefined))?.state, { timeout: 60_000 })
      .toBe("NoDomain");
    await expect(client.sync()).rejects.toMatchObject({
      code: "BadRequest",
      message: expect.stringContaining("nothing to boot"),
    });
    // Fencing: a second launcher for the same VMI on this node refuses to start (exit 4) and serves nothing.
    const second = spawnSync(
      process.execPath,
      [mainPath, "--vmi", vmiFile, "--socket-dir", dir, "--pod-dir", join(dir, "pod2"), "--log-level", "silent"],
      { encoding: "utf8", timeout: 60_000 },
    );
    expect(second.status).toBe(4);
    expect(second.stderr).toContain("another virt-launcher on this node holds its lock");
    expect((await client.info()).pid).toBe(child.pid); // the first one still serves the socket
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
  }, 90_000);
});
