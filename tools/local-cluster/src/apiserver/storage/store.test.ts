import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { pino } from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ApiError } from "../errors.ts";
import type { KubeObject } from "../types.ts";
import { Store, type StoreEvent } from "./store.ts";

const logger = pino({ level: "silent" });
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const obj = (name: string, v = 1): KubeObject => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name, namespace: "ns" },
  data: { v: String(v) },
});

describe("Store", () => {
  it("numbers every write with one global revision and stamps resourceVersion", async () => {
    const s = Store.open({ logger });
    const a = s.put("core/configmaps", "ns/a", obj("a"));
    const b = s.put("core/secrets", "ns/b", obj("b"));
    await Promise.all([a.committed, b.committed]);
    expect(a.entry.rev + 1).toBe(b.entry.rev);
    expect(s.get("core/configmaps", "ns/a")?.obj.metadata.resourceVersion).toBe(String(a.entry.rev));
    expect(s.revision).toBe(b.entry.rev);
    await s.close();
  });

  it("keeps state and watch history across a reopen of the same file", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kvt-store-"));
    dirs.push(dir);
    const path = join(dir, "state.db");
    const s1 = Store.open({ path, logger });
    await s1.put("core/configmaps", "ns/a", obj("a")).committed;
    await s1.put("core/configmaps", "ns/a", obj("a", 2)).committed;
    await s1.put("core/configmaps", "ns/b", obj("b")).committed;
    await s1.remove("core/configmaps", "ns/b", obj("b")).committed;
    await s1.close();
    const s2 = Store.open({ path, logger });
    expect(s2.revision).toBe(4);
    expect(s2.get("core/configmaps", "ns/a")?.obj.data).toEqual({ v: "2" });
    expect(s2.get("core/configmaps", "ns/b")).toBeUndefined();
    expect(s2.eventsSince(1, "core/configmaps").map((e) => `${e.type} ${e.id} ${e.rev}`)).toEqual([
      "MODIFIED ns/a 2",
      "ADDED ns/b 3",
      "DELETED ns/b 4",
    ]);
    await s2.put("core/configmaps", "ns/c", obj("c")).committed;
    expect(s2.revision).toBe(5);
    await s2.close();
  });

  it("answers 410 Expired for history older than the compacted revision, and compacts the log", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kvt-store-"));
    dirs.push(dir);
    const path = join(dir, "state.db");
    const s = Store.open({ path, logger });
    for (let i = 0; i < 5; i++) await s.put("core/configmaps", "ns/a", obj("a", i)).committed;
    s.compact(3);
    expect(() => s.eventsSince(2, "core/configmaps")).toThrow(ApiError);
    try {
      s.eventsSince(1, "core/configmaps");
    } catch (e) {
      expect((e as ApiError).code).toBe(410);
      expect((e as ApiError).message).toBe("too old resource version: 1 (3)");
    }
    expect(s.eventsSince(3, "core/configmaps").map((e) => e.rev)).toEqual([4, 5]);
    await s.close();
    const again = Store.open({ path, logger });
    expect(again.compactedRevision).toBe(3);
    expect(again.get("core/configmaps", "ns/a")?.obj.data).toEqual({ v: "4" });
    expect(again.eventsSince(3, "core/configmaps").map((e) => e.rev)).toEqual([4, 5]);
    await again.close();
  });

  it("retains history by age and count", async () => {
    const s = Store.open({ logger, historyMs: 1000, historyMinEvents: 2 });
    for (let i = 0; i < 5; i++) await s.put("core/configmaps", `ns/o${i}`, obj(`o${i}`)).committed;
    s.compact(undefined, Date.now() + 500);
    expect(s.compactedRevision).toBe(0);
    s.compact(undefined, Date.now() + 5000);
    expect(s.compactedRevision).toBe(3);
    expect(s.eventsSince(3, "core/configmaps")).toHaveLength(2);
    await s.close();
  });

  it("commits writes sent over many loop turns without waiting, in revision order, each acknowledged once published", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kvt-store-"));
    dirs.push(dir);
    const path = join(dir, "state.db");
    const s = Store.open({ path, logger });
    const published: number[] = [];
    s.subscribe((ev: StoreEvent) => published.push(ev.rev));
    const acks: Promise<void>[] = [];
    for (let turn = 0; turn < 20; turn++) {
      for (let i = 0; i < 10; i++) {
        const { entry, committed } = s.put("core/configmaps", `ns/o${turn}-${i}`, obj(`o${turn}-${i}`));
        acks.push(committed.then(() => expect(published).toContain(entry.rev)));
      }
      await new Promise((r) => setImmediate(r));
    }
    await Promise.all(acks);
    expect(published).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
    await s.close();
    const again = Store.open({ path, logger });
    expect(again.revision).toBe(200);
    expect(again.list("core/configmaps")).toHaveLength(200);
    await again.close();
  });

  it("undoes a refused batch and every later one, reports it, and takes writes again by itself", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kvt-store-"));
    dirs.push(dir);
    const path = join(dir, "state.db");
    const s = Store.open({ path, logger });
    const published: string[] = [];
    s.subscribe((ev: StoreEvent) => published.push(ev.id));
    await s.put("core/configmaps", "ns/a", obj("a")).committed;
    // Another connection takes revision 3, so the store's commit of its own revision 3 fails (PRIMARY KEY).
    const db = new DatabaseSync(path);
    db.prepare("INSERT INTO kv (rev, coll, id, value, prev_rev, deleted) VALUES (3, 'x', 'y', '{}', 0, 0)").run();
    db.close();
    const names = ["b", "c", "d"];
    const writes: Promise<void>[] = [];
    // The store's health as each refusal reached its writer (its disk probe may recover it a second later, which a
    // loaded machine can reach before the assertions below). Handled at once: a refusal can arrive while the loop
    // still waits, before Promise.allSettled sees the promises.
    const healthAtRefusal: unknown[] = [];
    const watched = (committed: Promise<void>): Promise<void> => {
      const p = committed.catch((err: unknown) => {
        healthAtRefusal.push(s.health());
        throw err;
      });
      p.catch(() => undefined);
      return p;
    };
    for (const name of names) {
      writes.push(watched(s.put("core/configmaps", `ns/${name}`, obj(name)).committed));
      await new Promise((r) => setImmediate(r));
    }
    // An update of "a" queued with "d": undone too if refused, leaving the committed "a" in place.
    const update = watched(s.put("core/configmaps", "ns/a", obj("a", 2)).committed);
    const settled = await Promise.allSettled([...writes, update]);
    // "c" takes the revision already taken; "b" may share its transaction (group commit) and fail with it.
    const refused = settled[1];
    expect(refused?.status).toBe("rejected");
    expect((refused as PromiseRejectedResult).reason).toMatchObject({ code: 500 });
    expect(String((refused as PromiseRejectedResult).reason.message)).toContain("storage write failed");
    // Every write is visible (in memory, to watchers, after a restart) exactly when it was acknowledged.
    for (const [i, name] of names.entries()) {
      const ok = settled[i]?.status === "fulfilled";
      expect(s.get("core/configmaps", `ns/${name}`) !== undefined, name).toBe(ok);
      expect(published.includes(`ns/${name}`), name).toBe(ok);
    }
    const updated = settled[3]?.status === "fulfilled";
    expect(s.get("core/configmaps", "ns/a")?.obj.data).toEqual({ v: updated ? "2" : "1" });
    expect(healthAtRefusal.length).toBeGreaterThan(0);
    for (const h of healthAtRefusal) expect(h).toMatchObject({ ok: false });
    // Writes resume by themselves: the next one commits and the store is healthy again.
    await s.put("core/configmaps", "ns/e", obj("e")).committed;
    expect(s.health()).toEqual({ ok: true });
    expect(published).toContain("ns/e");
    await s.close();
    const again = Store.open({ path, logger });
    for (const [i, name] of names.entries())
      expect(again.get("core/configmaps", `ns/${name}`) !== undefined, name).toBe(settled[i]?.status === "fulfilled");
    expect(again.get("core/configmaps", "ns/e")).toBeDefined();
    await again.close();
  });

  it("refuses an object over etcd's 1.5 MiB limit with 413 before it changes anything", async () => {
    const s = Store.open({ logger });
    const rev = s.revision;
    const big = { ...obj("big"), data: { v: "x".repeat(1.6 * 1024 * 1024) } };
    expect(() => s.put("core/configmaps", "ns/big", big)).toThrow(ApiError);
    expect(s.revision).toBe(rev);
    expect(s.get("core/configmaps", "ns/big")).toBeUndefined();
    await s.close();
  });

  it("checkpoints the WAL into the database file in the background, between commits", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kvt-store-"));
    dirs.push(dir);
    const path = join(dir, "state.db");
    const s = Store.open({ path, logger });
    // About 150 WAL pages: below SQLite's automatic checkpoint (1000 pages), so only the checkpointer moves them.
    const writes = Array.from(
      { length: 300 },
      (_, i) => s.put("core/configmaps", `ns/b${i}`, { ...obj(`b${i}`), data: { v: "x".repeat(2000) } }).committed,
    );
    await Promise.all(writes);
    await vi.waitFor(() => expect(statSync(path).size).toBeGreaterThan(300 * 2000), { timeout: 5000, interval: 50 });
    await s.close();
    const again = Store.open({ path, logger });
    expect(again.list("core/configmaps")).toHaveLength(300);
    await again.close();
  });
});
