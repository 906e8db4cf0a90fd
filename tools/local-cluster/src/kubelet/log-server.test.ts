import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startLogServer, tailLines } from "./log-server.ts";

let dir = "";
let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("log server", () => {
  it("tailLines() returns the last N lines", () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-log-"));
    const f = join(dir, "c.log");
    writeFileSync(f, "a\nb\nc\nd\n");
    expect(tailLines(f, 2).toString()).toBe("c\nd\n");
    expect(tailLines(f, 10).toString()).toBe("a\nb\nc\nd\n");
  });

  it("serves a container's log, follows appends, and 404s unknown containers", async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-log-"));
    const f = join(dir, "compute.log");
    writeFileSync(f, "boot\n");
    const server = await startLogServer((ns, pod, c) =>
      ns === "default" && pod === "p" && (c ?? "compute") === "compute" ? f : undefined,
    );
    close = server.close;
    const base = `http://127.0.0.1:${server.port}/containerLogs/default/p`;
    expect(await (await fetch(`${base}/compute`)).text()).toBe("boot\n");
    expect((await fetch(`${base}/other`)).status).toBe(404);
    const ac = new AbortController();
    const res = await fetch(`${base}/compute?follow=true`, { signal: ac.signal });
    const reader = res.body!.getReader();
    let seen = "";
    appendFileSync(f, "printed from cloud-init userdata\n");
    while (!seen.includes("cloud-init")) seen += new TextDecoder().decode((await reader.read()).value as Uint8Array);
    expect(seen).toBe("boot\nprinted from cloud-init userdata\n");
    ac.abort();
  });
});
