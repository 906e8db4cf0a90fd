import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import pkg from "../package.json" with { type: "json" };

const mainPath = new URL("./main.ts", import.meta.url).pathname;

describe("virt-controller main", () => {
  it("--help prints the version and a one-line usage and exits 0", () => {
    const out = execFileSync(process.execPath, [mainPath, "--help"], { encoding: "utf8" });
    expect(out).toContain(`virt-controller ${pkg.version}:`);
    expect(out).toMatch(/^Usage: virt-controller /m);
  });

  it("rejects a bad --metrics-port with exit code 2", () => {
    let status = 0;
    try {
      execFileSync(process.execPath, [mainPath, "--metrics-port", "nope"], { encoding: "utf8", stdio: "pipe" });
    } catch (error) {
      status = (error as { status: number }).status;
    }
    expect(status).toBe(2);
  });
});
