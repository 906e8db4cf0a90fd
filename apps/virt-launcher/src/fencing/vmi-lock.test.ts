import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { acquireVmiLock, VmiLockedError, vmiLockPath } from "./vmi-lock.ts";

const lockModule = new URL("./vmi-lock.ts", import.meta.url).href;
let dir = "";
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Tries the lock from another process: "locked" when it got it, else the error's name. */
function tryInOtherProcess(socketDir: string, uid: string): string {
  const script = `import { acquireVmiLock } from ${JSON.stringify(lockModule)};
try { acquireVmiLock(${JSON.stringify(socketDir)}, ${JSON.stringify(uid)}); console.log("locked"); }
catch (e) { console.log(e.name); }`;
  return spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" }).stdout.trim();
}

describe("acquireVmiLock", () => {
  it("refuses a second holder of the same VMI, in this process or another, until the first releases", () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-lock-"));
    const lock = acquireVmiLock(dir, "uid-1");
    expect(lock.path).toBe(join(dir, "locks", "uid-1.lock"));
    expect(() => acquireVmiLock(dir, "uid-1")).toThrow(VmiLockedError);
    expect(tryInOtherProcess(dir, "uid-1")).toBe("VmiLockedError");
    expect(tryInOtherProcess(dir, "uid-2")).toBe("locked"); // another VMI is not fenced
    lock.release();
    expect(tryInOtherProcess(dir, "uid-1")).toBe("locked");
  });

  it("is released by the kernel when its holder is killed with SIGKILL", async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-lock-"));
    const script = `import { acquireVmiLock } from ${JSON.stringify(lockModule)};
acquireVmiLock(${JSON.stringify(dir)}, "uid-1"); console.log("held"); setInterval(() => {}, 1000);`;
    const holder = spawn(process.execPath, ["--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "ignore"],
    });
    await new Promise<void>((resolve) => holder.stdout?.on("data", () => resolve()));
    expect(tryInOtherProcess(dir, "uid-1")).toBe("VmiLockedError");
    const exited = new Promise((r) => holder.once("exit", r));
    holder.kill("SIGKILL");
    await exited;
    expect(tryInOtherProcess(dir, "uid-1")).toBe("locked");
  });

  it("names the VMI and the lock in its message, and rejects a uid that is not a file name", () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-lock-"));
    const lock = acquireVmiLock(dir, "uid-1");
    try {
      expect(() => acquireVmiLock(dir, "uid-1")).toThrow(
        `Cannot start a guest for VirtualMachineInstance uid-1: another virt-launcher on this node holds its lock "${lock.path}"`,
      );
    } finally {
      lock.release();
    }
    expect(() => vmiLockPath(dir, "../x")).toThrow(TypeError);
  });
});
