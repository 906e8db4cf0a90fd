/**
 * The real control plane end to end: `up --nodes 0` on a fresh cluster directory, kubectl (the one built beside the
 * server) against it, `status`, then `down` leaving no process. Needs the binaries of `npm run kube -- build` (tens
 * of minutes cold, so CI does not build them yet) and root (the bridge the API server listens on): without them the
 * suite is skipped and says so. kube-nodes.integration.test.ts adds the nodes.
 */
import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { processAlive } from "@kvt/local-cluster";
import { afterAll, describe, expect, it } from "vitest";
import { binariesReady, binDir, DEFAULT_DATA_DIR } from "./build.ts";
import { type ClusterState, down, readState, status, up } from "./cluster.ts";
import { clusterPaths } from "./control-plane.ts";

const run = promisify(execFile);
const built = binariesReady(DEFAULT_DATA_DIR);
const root = process.getuid?.() === 0;
const skipNote = !built
  ? " (skipped: binaries not built; run `npm run kube -- build` first)"
  : root
    ? ""
    : " (skipped: needs root for the cluster bridge)";

/** kubectl from the build, with the admin kubeconfig; resolves with stdout and the exit code. */
async function kubectl(kubeconfig: string, ...args: string[]): Promise<{ stdout: string; code: number }> {
  const bin = join(binDir(DEFAULT_DATA_DIR), "kubectl");
  try {
    const { stdout } = await run(bin, ["--kubeconfig", kubeconfig, ...args], { timeout: 30_000 });
    return { stdout: stdout.trim(), code: 0 };
  } catch (error) {
    const e = error as { stdout?: string; code?: number };
    return { stdout: String(e.stdout ?? "").trim(), code: typeof e.code === "number" ? e.code : -1 };
  }
}

describe.skipIf(!built || !root)(`kube-apiserver, etcd, controller-manager and scheduler${skipNote}`, () => {
  // A fresh directory that `up` makes (nothing is made when the suite is skipped).
  const clusterDir = join(tmpdir(), `kvt-kube-${randomUUID().slice(0, 8)}`);
  const where = { dataDir: DEFAULT_DATA_DIR, clusterDir };
  afterAll(async () => {
    await down(where);
    rmSync(clusterDir, { recursive: true, force: true });
  });

  it("comes up with TLS and RBAC, reports health, and goes down leaving nothing running", async () => {
    const { kubeconfig } = await up({ ...where, nodes: 0, log: () => undefined });
    expect(kubeconfig).toBe(clusterPaths(clusterDir).adminKubeconfig);

    expect(await kubectl(kubeconfig, "get", "--raw", "/readyz")).toEqual({ stdout: "ok", code: 0 });
    // The admin (system:masters) may; an authenticated user and a fresh service account without bindings may not:
    // RBAC decides (impersonated by the admin, as `kubectl auth can-i --as` does).
    expect(await kubectl(kubeconfig, "auth", "can-i", "create", "pods")).toEqual({ stdout: "yes", code: 0 });
    expect(await kubectl(kubeconfig, "auth", "can-i", "list", "secrets", "--as", "jane")).toEqual({
      stdout: "no",
      code: 1,
    });
    const sa = "system:serviceaccount:default:default";
    expect(await kubectl(kubeconfig, "auth", "can-i", "create", "pods", "--as", sa)).toEqual({ stdout: "no", code: 1 });
    // The server is the release that was built, not our embedded one.
    const version = JSON.parse((await kubectl(kubeconfig, "get", "--raw", "/version")).stdout) as {
      gitVersion: string;
    };
    expect(version.gitVersion).toMatch(/^v1\.\d+\.\d+$/);

    // The controller manager and scheduler come up after the API server: poll their health for a while.
    const deadline = Date.now() + 60_000;
    let health = (await status(where)).components;
    while (health.some((h) => !h.ok) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 1000));
      health = (await status(where)).components;
    }
    expect(health.map((h) => [h.name, h.ok])).toEqual([
      ["etcd", true],
      ["kube-apiserver", true],
      ["kube-controller-manager", true],
      ["kube-scheduler", true],
      ["registry", true],
    ]);
    expect(health.every((h) => (h.rssBytes ?? 0) > 0)).toBe(true);

    const state = readState(where) as ClusterState;
    const pids = [state.supervisorPid, ...Object.values(state.pids)] as number[];
    expect(pids).toHaveLength(6);
    expect(await down(where)).toBe(true);
    expect(pids.filter((pid) => processAlive(pid))).toEqual([]);
    expect(existsSync(clusterPaths(clusterDir).state)).toBe(false);
    expect(readFileSync(join(clusterPaths(clusterDir).logs, "kube-apiserver.log"), "utf8")).not.toBe("");
  }, 240_000);
});
