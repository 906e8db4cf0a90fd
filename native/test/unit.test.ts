import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";

const nativeDir = new URL("..", import.meta.url).pathname;

// Inside the nested lane's L1 the tree is read-only: the lane built the binary on the host (tools/nested lane.ts
// prepareLane), so it is run directly there instead of through make.
const inL1 = process.env.KVT_NESTED_L1 !== undefined;

describe("native C++ unit tests (make unit-test: devices, memory, exit dispatch, ELF loader, state blob)", () => {
  it("build and pass", () => {
    const [cmd, args] = inL1 ? ["build/test/unit_tests", []] : ["make", ["-s", "unit-test"]];
    const r = spawnSync(cmd, args, { cwd: nativeDir, encoding: "utf8", timeout: 240_000 });
    const output = `${r.stdout}${r.stderr}`;
    if (r.status !== 0) console.error(output);
    // The failing tests' lines in the message itself: the nested lane reports a failure by its message.
    const failures = output.split("\n").filter((l) => /^(FAIL|not ok)|fail(ed|ure)?:|error/i.test(l));
    expect(r.status, `${r.error?.message ?? ""} ${failures.slice(0, 5).join(" | ") || output.slice(-600)}`).toBe(0);
    expect(output).toMatch(/\d+ tests, 0 failed/);
  }, 300_000);
});
