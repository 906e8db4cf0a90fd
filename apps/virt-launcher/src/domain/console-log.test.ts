import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CONSOLE_LOG_DEFAULTS, RotatingConsoleLog } from "./console-log.ts";

let dir: string;
let path: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "console-log-"));
  path = join(dir, "virt-serial0-log");
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const bytes = (s: string) => Buffer.from(s);
const read = (p: string) => readFileSync(p, "utf8");

describe("RotatingConsoleLog", () => {
  it("uses virtlogd's defaults: 2 MiB per file, 3 backups", () => {
    expect(CONSOLE_LOG_DEFAULTS).toEqual({ maxBytes: 2 * 1024 * 1024, backups: 3 });
  });

  it("appends below the cap", () => {
    const log = new RotatingConsoleLog(path, { maxBytes: 100 });
    log.write(bytes("hello "));
    log.write(bytes("world\n"));
    log.close();
    expect(read(path)).toBe("hello world\n");
    expect(readdirSync(dir)).toEqual(["virt-serial0-log"]);
  });

  it("fills the file to the cap, then rotates path -> path.0 -> path.1 ... and drops the oldest", () => {
    const log = new RotatingConsoleLog(path, { maxBytes: 4, backups: 2 });
    log.write(bytes("aaaabb"));
    expect(read(path)).toBe("bb");
    expect(read(`${path}.0`)).toBe("aaaa");
    log.write(bytes("bbccccdddd"));
    log.write(bytes("e"));
    log.close();
    expect(read(path)).toBe("e");
    expect(read(`${path}.0`)).toBe("dddd");
    expect(read(`${path}.1`)).toBe("cccc");
    expect(existsSync(`${path}.2`)).toBe(false);
    expect(readdirSync(dir).sort()).toEqual(["virt-serial0-log", "virt-serial0-log.0", "virt-serial0-log.1"]);
  });

  it("caps what a chatty guest leaves on disk at (1 + backups) x maxBytes", () => {
    const log = new RotatingConsoleLog(path, { maxBytes: 64 * 1024, backups: 1 });
    const line = bytes(`${"x".repeat(99)}\n`);
    for (let i = 0; i < 20_000; i++) log.write(line); // 2 MB of output
    log.close();
    const total = readdirSync(dir).reduce((sum, f) => sum + statSync(join(dir, f)).size, 0);
    expect(total).toBeLessThanOrEqual(2 * 64 * 1024);
    expect(statSync(path).size).toBeLessThanOrEqual(64 * 1024);
    // The newest output is kept: the file ends with the last line written.
    expect(read(path).endsWith(line.toString())).toBe(true);
  });

  it("counts an existing file's size (a restarted launcher keeps the cap)", () => {
    writeFileSync(path, "123");
    const log = new RotatingConsoleLog(path, { maxBytes: 4, backups: 1 });
    log.write(bytes("45"));
    log.close();
    expect(read(`${path}.0`)).toBe("1234");
    expect(read(path)).toBe("5");
  });

  it("with 0 backups starts the file over at the cap", () => {
    const log = new RotatingConsoleLog(path, { maxBytes: 3, backups: 0 });
    log.write(bytes("abcde"));
    log.close();
    expect(read(path)).toBe("de");
    expect(readdirSync(dir)).toEqual(["virt-serial0-log"]);
  });

  it("never throws: a failed write is dropped, reported once, and later writes resume", () => {
    const errors: string[] = [];
    const log = new RotatingConsoleLog(join(dir, "missing-dir", "log"), {}, (e) =>
      errors.push((e as NodeJS.ErrnoException).code ?? ""),
    );
    expect(() => log.write(bytes("a"))).not.toThrow();
    expect(() => log.write(bytes("b"))).not.toThrow();
    expect(log.dropped).toBe(2);
    expect(errors).toEqual(["ENOENT"]);
    const full = new RotatingConsoleLog("/dev/full", {}, (e) => errors.push((e as NodeJS.ErrnoException).code ?? ""));
    expect(() => full.write(bytes("x"))).not.toThrow();
    expect(errors).toEqual(["ENOENT", "ENOSPC"]);
  });
});
