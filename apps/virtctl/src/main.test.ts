import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import pkg from "../package.json" with { type: "json" };

const mainPath = new URL("./main.ts", import.meta.url).pathname;

describe("virtctl main", () => {
  it("--help lists the commands and exits 0", () => {
    const out = execFileSync(process.execPath, [mainPath, "--help"], { encoding: "utf8" });
    expect(out).toContain("Available Commands:");
    expect(out).toMatch(/^ {2}console +Connect to a console/m);
  });

  it("version -c prints the client version.Info", () => {
    const out = execFileSync(process.execPath, [mainPath, "version", "-c"], { encoding: "utf8" });
    expect(out).toContain(`Client Version: version.Info{GitVersion:"v${pkg.version}"`);
  });
});
