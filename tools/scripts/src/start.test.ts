/** `npm start` refuses a data directory another live `npm start` holds (its start.lock), before starting anything. */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("npm start on a data directory in use", () => {
  it("exits 1 naming the pid that holds the lock, and leaves the lock alone", () => {
    const dir = mkdtempSync(join(tmpdir(), "kvt-start-lock-"));
    dirs.push(dir);
    // The test runner is a live process: it plays the other npm start.
    writeFileSync(join(dir, "start.lock"), `${process.pid}\n`);
    const start = new URL("./start.ts", import.meta.url).pathname;
    const r = spawnSync(process.execPath, [start, "--data-dir", dir, "--no-demo"], {
      encoding: "utf8",
      timeout: 30_000,
    });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`the data directory ${dir} is in use by another npm start (pid ${process.pid}`);
    expect(r.stdout).not.toContain("starting the API server");
    expect(readFileSync(join(dir, "start.lock"), "utf8").trim()).toBe(String(process.pid));
  });
});
