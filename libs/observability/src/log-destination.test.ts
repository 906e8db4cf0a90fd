import { spawn } from "node:child_process";
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { DroppingDestination } from "./log-destination.ts";

const dir = mkdtempSync(join(tmpdir(), "log-destination-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const settle = (ms = 50) => new Promise((r) => setTimeout(r, ms));

describe("DroppingDestination", () => {
  it("writes lines to its descriptor in order", async () => {
    const file = join(dir, "ok.log");
    const fd = openSync(file, "w");
    const d = new DroppingDestination(fd);
    for (let i = 0; i < 100; i++) d.write(`line ${i}\n`);
    await settle();
    closeSync(fd);
    expect(readFileSync(file, "utf8").split("\n").slice(0, 3)).toEqual(["line 0", "line 1", "line 2"]);
    expect(readFileSync(file, "utf8").split("\n")).toHaveLength(101);
    expect(d.dropped).toBe(0);
  });

  it("drops and counts lines a full disk refuses (ENOSPC), reporting the failure once", async () => {
    const fd = openSync("/dev/full", "w");
    const errors: string[] = [];
    const d = new DroppingDestination(fd, { onError: (e) => errors.push((e as NodeJS.ErrnoException).code ?? "") });
    for (let i = 0; i < 20; i++) {
      d.write(`line ${i}\n`);
      await settle(1);
    }
    await settle();
    closeSync(fd);
    expect(d.dropped).toBeGreaterThan(0);
    expect(errors).toEqual(["ENOSPC"]);
    expect(() => d.flushSync()).not.toThrow();
  });

  it("resumes by itself when the descriptor takes bytes again", async () => {
    let full = true;
    const written: string[] = [];
    const d = new DroppingDestination(7, {
      write: ((_fd: number, buf: Buffer, cb: (err: NodeJS.ErrnoException | null, n: number) => void) => {
        if (full) setImmediate(() => cb(Object.assign(new Error("no space left on device"), { code: "ENOSPC" }), 0));
        else {
          written.push(buf.toString());
          setImmediate(() => cb(null, buf.length));
        }
      }) as never,
    });
    d.write("lost\n");
    await settle();
    full = false;
    d.write("kept\n");
    await settle();
    expect(written.join("")).toBe("kept\n");
    expect(d.dropped).toBe(1);
  });

  it("keeps the bytes and retries on EAGAIN (a full non-blocking pipe), dropping nothing", async () => {
    let busy = 3;
    const written: string[] = [];
    const d = new DroppingDestination(7, {
      write: ((_fd: number, buf: Buffer, cb: (err: NodeJS.ErrnoException | null, n: number) => void) => {
        if (busy-- > 0) setImmediate(() => cb(Object.assign(new Error("try again"), { code: "EAGAIN" }), 0));
        else {
          written.push(buf.toString());
          setImmediate(() => cb(null, buf.length));
        }
      }) as never,
    });
    d.write("a\n");
    d.write("b\n");
    await settle(200);
    expect(written.join("")).toBe("a\nb\n");
    expect(d.dropped).toBe(0);
  });

  it("bounds what waits: lines beyond maxBufferedBytes are dropped, not buffered", () => {
    const d = new DroppingDestination(7, {
      maxBufferedBytes: 10,
      write: (() => undefined) as never, // a write that never completes
    });
    expect(d.write("0123456789")).toBe(true); // taken by the (stuck) write
    expect(d.write("abcdefgh\n")).toBe(true); // waits
    expect(d.write("too much\n")).toBe(false);
    expect(d.dropped).toBe(1);
  });

  it("treats a descriptor that throws (EBADF) as a failed write", async () => {
    const d = new DroppingDestination(999_999);
    expect(() => d.write("x\n")).not.toThrow();
    await settle();
    expect(d.dropped).toBe(1);
  });
});

/** A process that logs through createLogger's default destination, with `stdout`/`stderr` as given. */
function runLogger(
  stdio: ["ignore", number | "pipe", number | "pipe"],
): Promise<{ code: number | null; alive: string }> {
  const marker = join(dir, `alive-${Math.random()}`);
  return new Promise((resolve) => {
    // The same runtime as this test: Node runs .ts directly, Deno needs `run -A`.
    const script = join(import.meta.dirname, "testdata", "chatty-logger.ts");
    const argv = "Deno" in globalThis ? ["run", "-A", script, marker] : [script, marker];
    const child = spawn(process.execPath, argv, { stdio });
    if (child.stdout) child.stdout.destroy(); // the reader goes away: EPIPE for the writer
    if (child.stderr) child.stderr.destroy();
    // A logger stuck on its output (the old sonic-boom flush retrying a full disk at exit) never ends: end it.
    const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
    child.on("exit", (code) => {
      clearTimeout(timer);
      let alive = "";
      try {
        alive = readFileSync(marker, "utf8");
      } catch {
        // no marker: the process died before it
      }
      resolve({ code, alive });
    });
  });
}

describe("a process whose log output cannot be written keeps working", () => {
  it("with stdout and stderr on a full disk (/dev/full)", async () => {
    const full = openSync("/dev/full", "w");
    const r = await runLogger(["ignore", full, full]);
    closeSync(full);
    expect(r).toEqual({ code: 0, alive: "alive" });
  });

  it("with stdout and stderr pipes whose reader is gone (EPIPE)", async () => {
    const r = await runLogger(["ignore", "pipe", "pipe"]);
    expect(r).toEqual({ code: 0, alive: "alive" });
  });
});
