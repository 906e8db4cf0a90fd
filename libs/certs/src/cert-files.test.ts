import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ensureCertificate, readCertificate, watchFiles } from "./cert-files.ts";
import { generateCa } from "./certs.ts";

let dir = "";
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe("certificate files", () => {
  it("ensureCertificate() writes once, key 0600 in a 0700 directory, and keeps a valid one", async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-certfiles-"));
    const pki = join(dir, "pki");
    let made = 0;
    const make = (): ReturnType<typeof generateCa> => {
      made++;
      return generateCa("x");
    };
    const files = await ensureCertificate(pki, "ca", make);
    await ensureCertificate(pki, "ca", make);
    expect(made).toBe(1);
    expect(statSync(files.key).mode & 0o777).toBe(0o600);
    expect(statSync(pki).mode & 0o777).toBe(0o700);
    expect(readCertificate(files)?.certPem).toContain("BEGIN CERTIFICATE");
  });

  it("watchFiles() reports new contents once per change", async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-certfiles-"));
    const a = join(dir, "tls.crt");
    writeFileSync(a, "one");
    const seen: string[][] = [];
    const watch = watchFiles([a], (c) => seen.push(c), 20);
    try {
      await new Promise((r) => setTimeout(r, 80));
      expect(seen).toEqual([]);
      writeFileSync(a, "two");
      const deadline = Date.now() + 2000;
      while (seen.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 80));
      expect(seen).toEqual([["two"]]);
    } finally {
      watch.stop();
    }
  });
});
