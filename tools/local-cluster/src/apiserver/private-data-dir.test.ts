/**
 * The API server's data directory holds every Secret (the database and its WAL) and its credentials (keys, tokens,
 * kubeconfigs): only its own user may read any of it. Before this, the directory was 0755 and the database and WAL
 * 0644 (world-readable Secret values).
 */
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { startApiServer } from "./apiserver.ts";
import { call } from "./extensions/testdata/fixtures.ts";

const root = mkdtempSync(join(tmpdir(), "kvt-private-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** What each entry must be: the directory 0700, files 0600 (a public certificate may stay 0644 inside it). */
function expectPrivate(m: Record<string, number>): void {
  for (const [f, mode] of Object.entries(m)) {
    const want = f === "." ? ["700"] : f.endsWith(".crt") ? ["600", "644"] : ["600"];
    expect(want, `${f} is ${mode.toString(8)}`).toContain(mode.toString(8));
  }
}

function modes(dir: string): Record<string, number> {
  const out: Record<string, number> = { ".": statSync(dir).mode & 0o777 };
  for (const f of readdirSync(dir)) out[f] = statSync(join(dir, f)).mode & 0o777;
  return out;
}

describe("the API server's data directory", () => {
  it("is 0700 with every file 0600: database, WAL, keys, tokens, kubeconfigs (certificates may be 0644)", async () => {
    const dataDir = join(root, "fresh");
    const api = await startApiServer({ dataDir });
    try {
      const secret = { metadata: { name: "s" }, stringData: { password: "hunter2" } };
      expect((await call(api, "POST", "/api/v1/namespaces/default/secrets", secret)).code).toBe(201);
      const m = modes(dataDir);
      expect(Object.keys(m)).toEqual(expect.arrayContaining(["state.db", "state.db-wal", "token", "kubeconfig"]));
      expect(Object.keys(m).some((f) => f.endsWith(".key"))).toBe(true);
      expectPrivate(m);
    } finally {
      await api.stop();
    }
  }, 60_000);

  it("narrows a directory and files an earlier version left readable", async () => {
    const dataDir = join(root, "old");
    mkdirSync(dataDir, { mode: 0o755 });
    chmodSync(dataDir, 0o755);
    writeFileSync(join(dataDir, "state.db"), "", { mode: 0o644 });
    chmodSync(join(dataDir, "state.db"), 0o644);
    const api = await startApiServer({ dataDir });
    try {
      const m = modes(dataDir);
      expectPrivate(m);
    } finally {
      await api.stop();
    }
  }, 60_000);
});
