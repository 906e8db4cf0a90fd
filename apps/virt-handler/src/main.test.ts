import { execFileSync, spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import pkg from "../package.json" with { type: "json" };

const mainPath = new URL("./main.ts", import.meta.url).pathname;

describe("virt-handler main", () => {
  it("--help prints the version and a one-line usage and exits 0", () => {
    const out = execFileSync(process.execPath, [mainPath, "--help"], { encoding: "utf8" });
    expect(out).toContain(`virt-handler ${pkg.version}:`);
    expect(out).toMatch(/^Usage: virt-handler /m);
  }, 60_000);

  it("refuses to start without its TLS material: console and pause never go over plain HTTP", () => {
    const r = spawnSync(process.execPath, [mainPath, "--node-name", "node01", "--tls-cert", "x.crt"], {
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("--tls-cert and --tls-key are required");
  }, 60_000);
});
