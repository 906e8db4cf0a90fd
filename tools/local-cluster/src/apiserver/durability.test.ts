/**
 * kill -9 durability: a server process is killed while clients are writing; after a restart on the same data
 * directory every acknowledged write is there, and the revision keeps growing.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { type ServerProcess, startServerProcess } from "./testdata/process.ts";

const dir = mkdtempSync(join(tmpdir(), "kvt-durability-"));
const servers: ServerProcess[] = [];
afterAll(() => {
  for (const s of servers) s.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("durability", () => {
  it("keeps every acknowledged write across kill -9", async () => {
    const first = await startServerProcess(dir);
    servers.push(first);
    const acked = new Map<string, string>();
    let stop = false;
    let next = 0;
    const writer = async (): Promise<void> => {
      while (!stop) {
        const name = `c-${next++}`;
        try {
          const r = await first.call("POST", "/api/v1/namespaces/default/configmaps", {
            metadata: { name },
            data: { n: name },
          });
          if (r.code === 201)
            acked.set(name, (r.body as { metadata: { resourceVersion: string } }).metadata.resourceVersion);
        } catch {
          return;
        }
      }
    };
    const writers = Array.from({ length: 8 }, writer);
    while (acked.size < 300) await new Promise((r) => setTimeout(r, 10));
    first.child.kill("SIGKILL");
    stop = true;
    await Promise.all(writers);
    await new Promise((r) => first.child.once("exit", r));
    const second = await startServerProcess(dir);
    servers.push(second);
    const list = await second.call("GET", "/api/v1/namespaces/default/configmaps");
    const items = (list.body as { items: { metadata: { name: string; resourceVersion: string } }[] }).items;
    const present = new Map(items.map((i) => [i.metadata.name, i.metadata.resourceVersion]));
    const missing = [...acked.keys()].filter((n) => !present.has(n));
    expect(missing).toEqual([]);
    for (const [name, rv] of acked) expect(present.get(name)).toBe(rv);
    const maxAcked = Math.max(...[...acked.values()].map(Number));
    const after = await second.call("POST", "/api/v1/namespaces/default/configmaps", {
      metadata: { name: "after-restart" },
    });
    expect(after.code).toBe(201);
    expect(Number((after.body as { metadata: { resourceVersion: string } }).metadata.resourceVersion)).toBeGreaterThan(
      maxAcked,
    );
    second.close();
  }, 60_000);
});
