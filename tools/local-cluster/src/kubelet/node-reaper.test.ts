import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { isLive, processStartTime, readRecords, writeRecord } from "./container-records.ts";
import { endContainers } from "./node-reaper.ts";

let dir = "";
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const record = (pid: number, startTime: string) => ({
  version: 1 as const,
  podUid: "p",
  container: "compute",
  pid,
  startTime,
  startedAt: new Date().toISOString(),
  exitFile: "/nonexistent",
  graceSeconds: 1,
});

describe("container records", () => {
  it("names a live process only while the pid has the recorded start time", () => {
    const start = processStartTime(process.pid);
    expect(start).toMatch(/^\d+$/);
    expect(isLive({ pid: process.pid, startTime: start! })).toBe(true);
    // The same pid with another start time is a recycled pid, not the container.
    expect(isLive({ pid: process.pid, startTime: String(Number(start) + 1) })).toBe(false);
    expect(processStartTime(2 ** 22 + 1)).toBeUndefined();
  });

  it("reads back what was written and skips files that are not records", () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-rec-"));
    writeRecord(dir, record(1234, "99"));
    writeFileSync(join(dir, "containers", "broken.json"), "{not json");
    const records = readRecords(dir);
    expect([...records.keys()]).toEqual(["compute"]);
    expect(records.get("compute")).toMatchObject({ pid: 1234, startTime: "99" });
  });
});

describe("node reaper", () => {
  it("ends a recorded container's process group: SIGTERM, then SIGKILL after the grace period", async () => {
    // A process that ignores SIGTERM: only the SIGKILL after the recorded 1 s grace ends it.
    const child = spawn("/bin/sh", ["-c", "trap '' TERM; sleep 60 & wait"], { detached: true, stdio: "ignore" });
    const pid = child.pid!;
    await new Promise((r) => setTimeout(r, 100));
    const started = Date.now();
    await endContainers([record(pid, processStartTime(pid)!)]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(isLive({ pid, startTime: "x" })).toBe(false);
  });
});
