import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { type OutsideErrors, outsideErrorsPath, reportPath } from "./index.ts";

const dir = mkdtempSync(join(tmpdir(), "kvt-vitest-config-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the outside-errors reporter, in a real vitest run", () => {
  it("names a failed afterAll, a timed-out beforeAll and an unhandled error, and nothing of a passing file", async () => {
    const config = new URL("./index.ts", import.meta.url).pathname;
    writeFileSync(
      join(dir, "vitest.config.ts"),
      `import { projectConfig } from ${JSON.stringify(config)};\nexport default projectConfig({ include: ["*.test.ts"] });\n`,
    );
    writeFileSync(
      join(dir, "hooks.test.ts"),
      `import { afterAll, beforeAll, describe, test } from "vitest";
describe("d", () => { afterAll(() => { throw new Error("cleanup broke\\nstack"); }); test("x", () => {}); });
describe("e", () => { beforeAll(() => new Promise((r) => setTimeout(r, 500)), 20); test("y", () => {}); });
`,
    );
    writeFileSync(
      join(dir, "late.test.ts"),
      `import { test } from "vitest";
test("z", () => { setTimeout(() => { throw new Error("thrown late"); }, 1); return new Promise((r) => setTimeout(r, 50)); });
`,
    );
    writeFileSync(join(dir, "fine.test.ts"), `import { test } from "vitest";\ntest("ok", () => {});\n`);
    const vitest = new URL("../../../node_modules/vitest/vitest.mjs", import.meta.url).pathname;
    const run = promisify(execFile)(process.execPath, [vitest, "run"], { cwd: dir });
    await expect(run).rejects.toMatchObject({ code: 1 });

    const outside = JSON.parse(readFileSync(join(dir, outsideErrorsPath(reportPath())), "utf8")) as OutsideErrors;
    expect(outside).toEqual({
      [join(dir, "hooks.test.ts")]: ["d: cleanup broke", "e: Hook timed out in 20ms."],
      "(unhandled)": ["Error: thrown late"],
    });
  });
});
