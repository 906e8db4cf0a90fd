import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { resolveMetaPackage, resolvePackage, resolvePackages } from "./debian.ts";

/** apt's own answer for the candidate versions of `names` (one `apt-cache policy` call), by name. */
function candidates(names: readonly string[]): Map<string, string> {
  const out = execFileSync("apt-cache", ["policy", ...names], { encoding: "utf8" });
  const found = new Map<string, string>();
  for (const m of out.matchAll(/^(\S+):\n\s+Installed: .*\n\s+Candidate: (\S+)/gm)) found.set(m[1] ?? "", m[2] ?? "");
  return found;
}

describe("Debian package versions", () => {
  it("resolves several names in one batch, in their order, to apt's candidates", async () => {
    const names = ["busybox-static", "dropbear-bin", "libc6"];
    const pkgs = await resolvePackages(names);
    const apt = candidates(names);
    expect(pkgs).toEqual(names.map((name) => ({ name, version: apt.get(name) })));
    // Answered again from what this process was shown, the same.
    expect(await resolvePackage("dropbear-bin")).toEqual(pkgs[1]);
  });

  it("resolves a metapackage to the versioned package it depends on", async () => {
    const kernel = await resolveMetaPackage("linux-image-amd64", /^linux-image-\d.*-amd64$/);
    expect(kernel.name).toMatch(/^linux-image-\d.*-amd64$/);
    expect(kernel.version).toBe(candidates([kernel.name]).get(kernel.name));
  });
});
