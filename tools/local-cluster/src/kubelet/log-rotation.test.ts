import { spawn } from "node:child_process";
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CONTAINER_LOG_MAX_BYTES, rotateLog } from "./log-rotation.ts";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "log-rotation-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe("rotateLog (copytruncate at the kubelet's containerLogMaxSize)", () => {
  it("defaults to the kubelet's 10Mi", () => {
    expect(CONTAINER_LOG_MAX_BYTES).toBe(10 * 1024 * 1024);
  });

  it("leaves a file under the cap alone", () => {
    const log = join(dir, "c.log");
    writeFileSync(log, "small\n");
    expect(rotateLog(log, 100)).toBe(false);
    expect(readFileSync(log, "utf8")).toBe("small\n");
  });

  it("moves a file over the cap to .1 (replacing the older one) and truncates it in place", () => {
    const log = join(dir, "c.log");
    writeFileSync(`${log}.1`, "oldest\n");
    writeFileSync(log, "x".repeat(150));
    expect(rotateLog(log, 100)).toBe(true);
    expect(readFileSync(`${log}.1`, "utf8")).toBe("x".repeat(150));
    expect(statSync(log).size).toBe(0);
  });

  it("a running writer with an O_APPEND descriptor keeps logging into the truncated file, bounded", async () => {
    const log = join(dir, "c.log");
    const fd = openSync(log, "a");
    // A chatty container: 200 bytes every ms for a while.
    const child = spawn(
      process.execPath,
      [
        "-e",
        "const l='y'.repeat(199)+'\\n'; let n=0; const t=setInterval(()=>{process.stdout.write(l); if(++n===1500){clearInterval(t); process.stdout.write('last\\n')}},1)",
      ],
      { stdio: ["ignore", fd, "ignore"] },
    );
    closeSync(fd);
    let maxSeen = 0;
    const exited = new Promise((r) => child.on("exit", r));
    let done = false;
    void exited.then(() => {
      done = true;
    });
    while (!done) {
      rotateLog(log, 16 * 1024);
      maxSeen = Math.max(maxSeen, statSync(log).size);
      await new Promise((r) => setTimeout(r, 20));
    }
    // The loop's last rotation may come after the last write and before the exit event: then "last" is in .1.
    expect(readFileSync(`${log}.1`, "utf8") + readFileSync(log, "utf8")).toMatch(/last\n$/);
    expect(readFileSync(log, "utf8")).not.toContain("\0"); // no hole: writes land at the new end
    expect(statSync(`${log}.1`).size).toBeGreaterThan(16 * 1024);
    expect(maxSeen).toBeLessThan(300 * 1024); // 300 kB were written in all
  });
});
