import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { resolveMetaPackage, resolvePackage, resolvePackages } from "./debian.ts";

/** apt's own answer for the candidate version of `name`, one apt-cache call per name. */
function candidate(name: string): string {
  const out = execFileSync("apt-cache", ["policy", name], { encoding: "utf8" });
  return /Candidate: (\S+)/.exec(out)?.[1] ?? "";
}

describe("Debian package versions", () => {
  it("resolves several names in one batch, in their order, to apt's candidates", async () => {
    const names = ["busybox-static", "dropbear-bin", "libc6"];
    const pkgs = await resolvePackages(names);
    expect(pkgs).toEqual(names.map((name) => ({ name, version: candidate(name) })));
    // Answered again from what this process was shown, the same.
    expect(await resolvePackage("dropbear-bin")).toEqual(pkgs[1]);
  });

  it("resolves a metapackage to the versioned package it depends on", async () => {
    const kernel = await resolveMetaPackage("linux-image-amd64", /^linux-image-\d.*-amd64$/);
    expect(kernel.name).toMatch(/^linux-image-\d.*-amd64$/);
    expect(kernel.version).toBe(candidate(kernel.name));
  });
});
