/**
 * Storage faults against a real started API server whose data dir is a small tmpfs that the test fills up:
 * a refused write answers a clear 500 ("database space exceeded") and is never visible, reads, watches and /livez
 * keep answering, /readyz and /healthz report the storage failure, and writes resume by themselves once space
 * returns, without a restart. Mounting a tmpfs needs root: elsewhere the suite is skipped and says so.
 * Also: an API server whose log output cannot be written (stdout on /dev/full) keeps serving.
 */
import { spawn, spawnSync } from "node:child_process";
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeSync } from "node:fs";
import { request } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { type ApiServerHandle, startApiServer } from "./apiserver.ts";
import { call, eventually } from "./extensions/testdata/fixtures.ts";

const CMS = "/api/v1/namespaces/default/configmaps";
const root = mkdtempSync(join(tmpdir(), "kvt-disk-full-"));
const mnt = join(root, "mnt");

/** Mounts an 8 MiB tmpfs; answers why not when it cannot (the reason names the skipped suite). */
function mountTmpfs(): string | undefined {
  if (process.getuid?.() !== 0) return "needs root to mount a tmpfs";
  mkdirSync(mnt, { recursive: true });
  const r = spawnSync("mount", ["-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", mnt], { encoding: "utf8" });
  return r.status === 0 ? undefined : `mount -t tmpfs failed: ${(r.stderr || r.error?.message || "").trim()}`;
}
const skipReason = mountTmpfs();

/** Fills the file system of `dir` with a file until ENOSPC; returns its path. */
function fill(dir: string): string {
  const path = join(dir, "filler");
  const fd = openSync(path, "w");
  const chunk = Buffer.alloc(64 * 1024, 1);
  try {
    for (let size = chunk.length; size >= 512; ) {
      try {
        writeSync(fd, chunk, 0, size);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ENOSPC") throw err;
        size >>= 1;
      }
    }
  } finally {
    closeSync(fd);
  }
  return path;
}

/** A watch on ConfigMaps collecting the names of ADDED objects. */
function watchAdded(api: ApiServerHandle, rv: string): { added: string[]; close(): void } {
  const added: string[] = [];
  let buf = "";
  const req = request(new URL(`${CMS}?watch=true&resourceVersion=${rv}`, api.url), {
    ca: api.caCert,
    headers: { authorization: `Bearer ${api.token}` },
  });
  req.on("response", (res) =>
    res.on("data", (d: Buffer) => {
      buf += d.toString();
      for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
        const ev = JSON.parse(buf.slice(0, i)) as { type: string; object: { metadata: { name: string } } };
        buf = buf.slice(i + 1);
        if (ev.type === "ADDED") added.push(ev.object.metadata.name);
      }
    }),
  );
  req.on("error", () => {
    // closed by the test
  });
  req.end();
  return { added, close: () => req.destroy() };
}

const cm = (name: string, bytes = 0) => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name },
  data: { v: "x".repeat(bytes) },
});

describe.skipIf(skipReason !== undefined)(
  `a full disk under the API server${skipReason ? ` (skipped: ${skipReason})` : ""}`,
  () => {
    let api: ApiServerHandle;

    beforeAll(async () => {
      api = await startApiServer({ dataDir: join(mnt, "data") });
    });

    afterAll(async () => {
      await api?.stop();
      spawnSync("umount", ["-l", mnt]);
      rmSync(root, { recursive: true, force: true });
    });

    it("refuses writes with a clear 500, hides them, keeps reads and watches, and resumes when space returns", async () => {
      expect((await call(api, "POST", CMS, cm("before", 100))).code).toBe(201);
      const listed = await call(api, "GET", CMS);
      const watch = watchAdded(api, (listed.body.metadata as { resourceVersion: string }).resourceVersion);
      const filler = fill(mnt);

      // Larger than the WAL so far: the commit needs new blocks, and the disk has none.
      const refused = await call(api, "POST", CMS, cm("refused", 600_000));
      expect(refused.code).toBe(500);
      expect(refused.body).toMatchObject({ kind: "Status", status: "Failure", code: 500 });
      expect(String(refused.body.message)).toMatch(/^storage: database space exceeded: database or disk is full/);
      expect(refused.body.message).not.toMatch(/cannot rollback/);

      // Never visible; reads go on.
      expect((await call(api, "GET", `${CMS}/refused`)).code).toBe(404);
      expect((await call(api, "GET", `${CMS}/before`)).code).toBe(200);
      const items = (await call(api, "GET", CMS)).body.items as { metadata: { name: string } }[];
      expect(items.map((i) => i.metadata.name)).toContain("before");
      expect(items.map((i) => i.metadata.name)).not.toContain("refused");

      // Health: alive, not ready, and it says why.
      expect((await call(api, "GET", "/livez")).code).toBe(200);
      const ready = await call(api, "GET", "/readyz");
      expect(ready.code).toBe(500);
      expect(ready.text).toContain("[+]ping ok");
      expect(ready.text).toMatch(/\[-\]storage failed: storage: database space exceeded/);
      expect(ready.text).toContain("readyz check failed");
      expect((await call(api, "GET", "/healthz")).code).toBe(500);

      // Still full: still refused, still hidden.
      expect((await call(api, "POST", CMS, cm("refused", 600_000))).code).toBe(500);
      expect((await call(api, "GET", `${CMS}/refused`)).code).toBe(404);

      // Space returns: the store notices by itself (no write needed), then writes go through.
      rmSync(filler);
      await eventually("ready again", async () =>
        (await call(api, "GET", "/readyz")).code === 200 ? true : undefined,
      );
      expect((await call(api, "POST", CMS, cm("after", 100))).code).toBe(201);
      expect((await call(api, "POST", CMS, cm("refused", 600_000))).code).toBe(201);
      expect((await call(api, "GET", `${CMS}/refused`)).code).toBe(200);
      await eventually("watch saw the later writes", async () =>
        watch.added.includes("after") && watch.added.includes("refused") ? true : undefined,
      );
      // The watch never saw the refused attempts: "refused" was added exactly once, after "after".
      expect(watch.added.filter((n) => n === "refused")).toHaveLength(1);
      expect(watch.added.indexOf("refused")).toBeGreaterThan(watch.added.indexOf("after"));
      watch.close();
    });
  },
);

describe("an API server whose log output cannot be written", () => {
  it("keeps serving with stdout on /dev/full and trace logging", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kvt-devfull-"));
    const full = openSync("/dev/full", "w");
    const main = new URL("./main.ts", import.meta.url).pathname;
    const child = spawn(process.execPath, [main, "--data-dir", dir, "--log-level", "trace"], {
      stdio: ["ignore", full, "pipe"],
    });
    closeSync(full);
    let exited: number | null | undefined;
    child.once("exit", (code) => {
      exited = code;
    });
    try {
      const kubeconfig = join(dir, "kubeconfig");
      await eventually("kubeconfig written", async () => (existsSync(kubeconfig) ? true : undefined), 20_000);
      const kc = parse(readFileSync(kubeconfig, "utf8")) as {
        clusters: { cluster: { server: string; "certificate-authority-data": string } }[];
        users: { user: { token: string } }[];
      };
      const api = {
        url: kc.clusters[0]?.cluster.server ?? "",
        token: kc.users[0]?.user.token ?? "",
        caCert: Buffer.from(kc.clusters[0]?.cluster["certificate-authority-data"] ?? "", "base64").toString(),
      } as ApiServerHandle;
      for (let i = 0; i < 50; i++) expect((await call(api, "POST", CMS, cm(`log-${i}`, 10))).code).toBe(201);
      await new Promise((r) => setTimeout(r, 300));
      expect(exited).toBeUndefined();
      expect((await call(api, "GET", "/livez")).code).toBe(200);
      // And it still stops on SIGTERM (a logger retrying a full disk at exit would hang it forever).
      const code = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      const stopped = await Promise.race([code, new Promise((r) => setTimeout(() => r("still running"), 10_000))]);
      expect(stopped).toBe(0);
    } finally {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGKILL");
        await new Promise((r) => child.once("exit", r));
      }
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
