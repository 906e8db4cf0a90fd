import { spawn } from "node:child_process";
import { appendFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { consoleDone, consoleDoneMarker, markConsoleDone } from "./domain/console-log-done.ts";

const tailPath = new URL("./virt-tail.ts", import.meta.url).pathname;
let dir: string | undefined;

afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

/** Runs virt-tail on `log`; resolves with its exit code and stdout once it exits. */
function runTail(log: string): { done: Promise<{ code: number | null; stdout: string }>; kill: () => void } {
  const child = spawn(process.execPath, [tailPath, "--logfile", log], { stdio: ["ignore", "pipe", "inherit"] });
  let stdout = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  const done = new Promise<{ code: number | null; stdout: string }>((resolve) =>
    child.once("exit", (code) => resolve({ code, stdout })),
  );
  return { done, kill: () => child.kill("SIGKILL") };
}

describe("the launcher's done marker (KubeVirt's termFileDone)", () => {
  it("sits beside the console log and is written once", () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-tail-"));
    const log = join(dir, "virt-serial0-log");
    expect(consoleDoneMarker(log)).toBe(`${log}-sigTerm-done`);
    expect(consoleDone(log)).toBe(false);
    expect(markConsoleDone(log)).toBe(true);
    expect(consoleDone(log)).toBe(true);
  });

  it("is not written where the console log's directory is gone, and that does not throw", () => {
    expect(markConsoleDone("/nonexistent-kvt-dir/virt-serial0-log")).toBe(false);
  });
});

describe("virt-tail", () => {
  it("copies the console log and exits 0 once the launcher marks itself done, with the last lines copied", async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-tail-"));
    const log = join(dir, "virt-serial0-log");
    appendFileSync(log, "line 1\n");
    const tail = runTail(log);
    try {
      await new Promise((r) => setTimeout(r, 1500));
      appendFileSync(log, "line 2, the last\n");
      markConsoleDone(log);
      const { code, stdout } = await tail.done;
      expect(code).toBe(0);
      expect(stdout).toBe("line 1\nline 2, the last\n");
    } finally {
      tail.kill();
    }
  }, 30_000);

  it("exits 0 on the marker of a launcher that never wrote a console log (a canceled migration's target)", async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-tail-"));
    const log = join(dir, "virt-serial0-log");
    const tail = runTail(log);
    try {
      await new Promise((r) => setTimeout(r, 1500));
      markConsoleDone(log);
      const { code, stdout } = await tail.done;
      expect(code).toBe(0);
      expect(stdout).toBe("");
    } finally {
      tail.kill();
    }
  }, 30_000);

  it("keeps following while the launcher runs (no marker)", async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-tail-"));
    const log = join(dir, "virt-serial0-log");
    const tail = runTail(log);
    const exited = await Promise.race([
      tail.done.then(() => true),
      new Promise((r) => setTimeout(() => r(false), 3000)),
    ]);
    tail.kill();
    expect(exited).toBe(false);
  }, 30_000);
});
