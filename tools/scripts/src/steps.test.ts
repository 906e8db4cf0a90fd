import { describe, expect, it } from "vitest";
import { formatTally, run } from "./steps.ts";

describe("run", () => {
  it("holds a step's stdout and stderr when asked, and resolves to its exit code after both ended", async () => {
    const output: Buffer[] = [];
    const script = "process.stdout.write('out\\n'); process.stderr.write('err\\n'); process.exitCode = 3";
    const code = await run(process.execPath, ["-e", script], { output });
    expect(code).toBe(3);
    expect(Buffer.concat(output).toString().split("\n").sort()).toEqual(["", "err", "out"]);
  });

  it("reports a command that cannot start as 127, in the held output", async () => {
    const output: Buffer[] = [];
    expect(await run("/nonexistent/kvt-no-such-command", [], { output })).toBe(127);
    expect(Buffer.concat(output).toString()).toMatch(/^cannot run \/nonexistent\/kvt-no-such-command: /);
  });

  it("formats the closing line CI reads", () => {
    expect(formatTally({ passed: 2, failed: 0, skipped: 1 })).toBe("2 passed, 0 failed, 1 skipped");
  });
});
