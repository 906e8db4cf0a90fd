import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readScriptArgs } from "./script-args.ts";

const root = new URL("../../../", import.meta.url).pathname;

describe("readScriptArgs()", () => {
  const config = { options: { nodes: { type: "string" }, quiet: { type: "boolean" } } } as const;

  it("returns the flags when they are all known", () => {
    const result = readScriptArgs("usage: x", { ...config, args: ["--nodes", "3", "--quiet"] });
    expect(result.kind === "parsed" && result.parsed.values).toEqual({ nodes: "3", quiet: true });
  });

  it.each([["--help"], ["-h"]])("%s answers the usage with code 0", (flag) => {
    expect(readScriptArgs("usage: x [--nodes N]", { ...config, args: [flag] })).toEqual({
      kind: "help",
      code: 0,
      text: "usage: x [--nodes N]\n",
    });
  });

  it.each([
    [["--bogus"], "Unknown option '--bogus'"],
    [["--nodes"], "Option '--nodes <value>' argument missing"],
    [["stray"], "Unexpected argument 'stray'"],
  ])("%j is refused with the usage and code 2", (args, message) => {
    const result = readScriptArgs("usage: x", { ...config, args });
    expect(result.kind).toBe("error");
    expect(result.kind === "error" && result.code).toBe(2);
    expect(result.kind === "error" && result.text).toContain(message);
    expect(result.kind === "error" && result.text).toMatch(/\nusage: x\n$/);
  });
});

// Every root npm script: `--help` prints its usage and exits 0 before doing anything; an unknown flag exits 2.
describe.each([
  ["npm start", "tools/scripts/src/start.ts", "usage: npm start"],
  ["npm test", "tools/scripts/src/test.ts", "usage: npm test"],
  ["npm run bench", "tools/scripts/src/bench.ts", "usage: npm run bench"],
  ["npm run trace", "tools/scripts/src/trace.ts", "usage: npm run trace"],
  ["npm run test:nested", "tools/nested/src/cli.ts", "usage: npm run test:nested"],
])("%s", (_name, script, usage) => {
  const runScript = (flag: string): ReturnType<typeof spawnSync> =>
    spawnSync(process.execPath, [join(root, script), flag], { cwd: root, encoding: "utf8", timeout: 20_000 });

  it("--help prints the usage and exits 0", () => {
    const out = runScript("--help");
    expect(out.stdout).toContain(usage);
    expect(out.status).toBe(0);
  });

  it("an unknown flag is refused with the usage, exit 2", () => {
    const out = runScript("--no-such-flag");
    expect(out.stderr).toContain("--no-such-flag");
    expect(out.stderr).toContain(usage);
    expect(out.stdout).toBe("");
    expect(out.status).toBe(2);
  });
});
