import { appendFileSync, mkdtempSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { eventually } from "@kvt/testing";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { followFile } from "./follow-file.ts";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "kvt-follow-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe("followFile", () => {
  it("copies appended bytes, then follows a rotation by rename without losing the old file's tail", async () => {
    const src = join(dir, "virt-serial0-log");
    const dst = join(dir, "guest-console-log.log");
    const stop = followFile(src, openSync(dst, "a"));
    appendFileSync(src, "one\n");
    await eventually(() => (readFileSync(dst, "utf8") === "one\n" ? true : undefined));
    appendFileSync(src, "two\n");
    renameSync(src, `${src}.0`); // the launcher rotates right after writing "two"
    appendFileSync(src, "three\n");
    await eventually(() => (readFileSync(dst, "utf8") === "one\ntwo\nthree\n" ? true : undefined));
    stop();
  });

  it("rests between changes: no copy pass without an event, but for its 2 s poll", async () => {
    const src = join(dir, "virt-serial0-log");
    appendFileSync(src, "one\n");
    let pumps = 0;
    const stop = followFile(src, openSync("/dev/null", "w"), 0, { onPump: () => pumps++ });
    await new Promise((r) => setTimeout(r, 200)); // the first pass, and any event of the append above
    const before = pumps;
    await new Promise((r) => setTimeout(r, 1500));
    expect(pumps - before).toBeLessThanOrEqual(1);
    appendFileSync(src, "two\n");
    await eventually(() => pumps > before + 1 || undefined);
    stop();
  });

  it("copies a fast writer's every line in about ten passes a second, not one per write", async () => {
    const src = join(dir, "virt-serial0-log");
    const dst = join(mkdtempSync(join(tmpdir(), "kvt-follow-out-")), "out.log");
    appendFileSync(src, "start\n");
    let pumps = 0;
    const stop = followFile(src, openSync(dst, "a"), 0, { onPump: () => pumps++ });
    let written = "start\n";
    for (let i = 0; i < 100; i++) {
      const chunk = Array.from({ length: 10 }, (_, k) => `line ${i * 10 + k}\n`).join("");
      appendFileSync(src, chunk);
      written += chunk;
      await new Promise((r) => setTimeout(r, 10));
    }
    await eventually(() => readFileSync(dst, "utf8") === written || undefined);
    stop();
    // 100 writes over at least a second: one pass per write would be 100.
    expect(pumps).toBeLessThan(40);
    rmSync(dirname(dst), { recursive: true, force: true });
  });

  it("starts over when the file is truncated in place", async () => {
    const src = join(dir, "s.log");
    const dst = join(dir, "d.log");
    writeFileSync(src, "aaaa\n");
    const stop = followFile(src, openSync(dst, "a"));
    await eventually(() => (readFileSync(dst, "utf8") === "aaaa\n" ? true : undefined));
    writeFileSync(src, "b\n"); // truncated, then a shorter line
    await eventually(() => (readFileSync(dst, "utf8") === "aaaa\nb\n" ? true : undefined));
    stop();
  });

  it("never throws when its destination is full", async () => {
    const src = join(dir, "s.log");
    writeFileSync(src, "to nowhere\n");
    const stop = followFile(src, openSync("/dev/full", "w"));
    appendFileSync(src, "more\n");
    await new Promise((r) => setTimeout(r, 300));
    expect(() => stop()).not.toThrow();
  });
});
