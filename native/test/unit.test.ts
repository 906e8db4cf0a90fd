import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";

const nativeDir = new URL("..", import.meta.url).pathname;

describe("native C++ unit tests (make unit-test: devices, memory, exit dispatch, ELF loader, state blob)", () => {
  it("build and pass", () => {
    const r = spawnSync("make", ["-s", "unit-test"], { cwd: nativeDir, encoding: "utf8", timeout: 240_000 });
    const output = `${r.stdout}${r.stderr}`;
    if (r.status !== 0) console.error(output);
    expect(r.status).toBe(0);
    expect(output).toMatch(/\d+ tests, 0 failed/);
  }, 300_000);
});
